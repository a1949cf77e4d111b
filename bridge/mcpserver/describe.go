package mcpserver

import (
	"fmt"
	"strings"
	"time"

	"github.com/gatebridge/gatebridge/gates"
)

// CapabilityText says how the sandboxed shell behaves and lists every
// gate with its usage: the bash tool's description, and `gatebridge
// prompt`. background says whether bash_output and write_stdin exist.
func CapabilityText(backend, workspace string, writable bool, timeout time.Duration, maxOutput int64, background bool, specs []gates.Spec) string {
	var b strings.Builder
	ws := "read-only"
	if writable {
		ws = "writable"
	}
	fmt.Fprintf(&b, "Run a command line with bash in a sandbox (%s backend). It starts in the workspace %s (%s). ", backend, workspace, ws)
	b.WriteString("Files written in the workspace persist between calls of this session; shell state (variables, cd, background jobs) does not: each call is a new bash. ")
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
