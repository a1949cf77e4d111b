package mcpserver

import (
	"fmt"
	"strings"
	"time"

	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/sandbox"
)

// CapabilityText says how the sandboxed shell behaves and lists every
// gate with its usage, for `gatebridge prompt`, where no sandbox is open:
// it says only what holds on every backend (whether the workspace is
// writable), not /tmp or the network. background says whether
// bash_output and write_stdin exist.
func CapabilityText(backend, workspace string, writable bool, timeout time.Duration, maxOutput int64, background bool, specs []gates.Spec) string {
	return capabilityText(backend, workspace, writable, control.DescribeShell(sandbox.Facts{}, false, writable), "", timeout, maxOutput, background, specs)
}

// description is the bash tool's description for h's open sandbox: what
// its backend states of the workspace, /tmp and the network
// (control.DescribeShell), and the command limits in force.
func (h *host) describe() string {
	o := h.opts
	limits := control.CommandLimitsText(h.srv.ctl.Options().MaxCommandBytes, h.srv.ctl.Options().MaxCommands)
	return capabilityText(h.sb.Backend(), h.sb.WorkspaceInside(), o.Writable, h.sb.DescribeShell(), limits, o.Timeout, o.MaxOutput, true, h.sb.Gates().Specs())
}

// capabilityText is CapabilityText with shell, the sentences that say
// what a command can count on (control.DescribeShell), and limits, the
// command limits' ("" for none).
func capabilityText(backend, workspace string, writable bool, shell, limits string, timeout time.Duration, maxOutput int64, background bool, specs []gates.Spec) string {
	var b strings.Builder
	ws := "read-only"
	if writable {
		ws = "writable"
	}
	fmt.Fprintf(&b, "Run a command line with bash in a sandbox (%s backend). It starts in the workspace %s (%s). ", backend, workspace, ws)
	b.WriteString(shell)
	b.WriteString("The shell state (variables, cd, background jobs) does not persist: each call is a new bash. ")
	b.WriteString(limits)
	if timeout > 0 {
		fmt.Fprintf(&b, "A call is stopped after %v (timeout_ms to change it; exit code 124). ", timeout)
	}
	fmt.Fprintf(&b, "Output is kept up to %d bytes per stream (head and tail; the middle is dropped and said so).", maxOutput)
	if background {
		b.WriteString(" With background: true the command starts and the call returns its process_id at once: bash_output reads what it printed since the last read (and its exit status once it has exited), write_stdin writes to its stdin.")
	}
	b.WriteString("\n\nHost tools are ordinary commands on PATH: they read arguments and stdin, print, and exit with a status, so they compose with pipes, $?, && and xargs. Exit 126: refused by policy; 127: no such command.\n")
	for _, s := range specs {
		usage := s.Usage
		if usage == "" {
			usage = s.Name
		}
		fmt.Fprintf(&b, "- %s: %s\n", usage, strings.ReplaceAll(s.Summary, "\n", " "))
	}
	return b.String()
}
