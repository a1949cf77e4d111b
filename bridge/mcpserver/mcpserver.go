// Package mcpserver is gatebridge's MCP server (`gatebridge mcp`): one
// bash tool, with bash_output and write_stdin for background processes,
// that runs command lines in a sandbox where every gate is a command.
// It is a front end of the control plane (bridge/control), which it
// calls directly: a [Server] opens one control.Sandbox per MCP session
// (stdio: one for the server's life; streamable HTTP: one per session,
// bounded and closed when idle) and starts a control.Process per call,
// with its own writers for the output. The control plane's command
// policy (bridge/cmdpolicy) decides each command line before anything
// starts.
package mcpserver

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatebridge/gatebridge/bridge/cmdpolicy"
	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/sandbox"
)

// Defaults of the mcp.sessions keys (Options and HTTPOptions fields left
// zero).
const (
	DefaultMaxSandboxes       = 4
	DefaultIdleTimeout        = 10 * time.Minute
	DefaultMaxBackground      = 16
	DefaultMaxBackgroundBytes = 16 << 20
)

// maxRunning bounds the processes one session runs at once (the JSON-RPC
// server's maxProcesses, which bounded them when the MCP server spoke it).
const maxRunning = 128

// retainedBytes is the control plane's MaxRetainedBytes under the MCP
// server: it keeps each process's head and tail for Snapshot, which the
// MCP server never reads (it keeps the output itself, as it comes).
const retainedBytes = 4 << 10

// Options configure the MCP server: the control plane under it, its
// sandbox and its bash tool.
type Options struct {
	// Control are the control plane's options (backends, gates, limits,
	// the session and process templates); MaxRetainedBytes is lowered.
	Control control.Options
	// Backend is "auto" ("" too) or a backend's name; Workspace is the
	// host directory the commands start in; Writable lets them write it.
	Backend   string
	Workspace string
	Writable  bool
	// Timeout ends a call without timeout_ms (0: the control plane's
	// process template's).
	Timeout time.Duration
	// MaxOutput is the bytes kept per stream of a call (head and tail; 0:
	// sandbox.DefaultMaxOutput).
	MaxOutput int64
	// Background processes kept per session (running, or exited and
	// unread), and the output bytes they hold in all
	// (mcp.sessions.max_background, max_background_bytes; 0: the
	// defaults).
	MaxBackground      int
	MaxBackgroundBytes int64
	// Policy decides every command line before it starts, and each gate
	// call again (nil: all are allowed): Control.Approvals.Commands when
	// that is nil. The control plane checks it (Sandbox.Prepare).
	Policy *cmdpolicy.Policy
	// Version is the server's version in the MCP handshake.
	Version string
}

// Server is the MCP server: a front end of one control plane.
type Server struct {
	opts Options
	ctl  *control.Host
}

// New returns a server with opts (zero limits take the defaults).
func New(opts Options) *Server {
	o := &opts
	if o.MaxOutput <= 0 {
		o.MaxOutput = sandbox.DefaultMaxOutput
	}
	o.MaxBackground = cmp.Or(max(o.MaxBackground, 0), DefaultMaxBackground)
	o.MaxBackgroundBytes = cmp.Or(max(o.MaxBackgroundBytes, 0), DefaultMaxBackgroundBytes)
	o.Backend = cmp.Or(o.Backend, control.Auto)
	c := o.Control
	c.MaxRetainedBytes = retainedBytes
	if c.Approvals.Commands == nil {
		c.Approvals.Commands = o.Policy
	}
	// The MCP server asks the client's person with elicitation when the
	// client declared it; otherwise a gate that needs approval runs only
	// with a grant, and its refusal says so (docs/approvals.md).
	c.Approvals.NoOne = cmp.Or(c.Approvals.NoOne, noOneOverMCP)
	return &Server{opts: opts, ctl: control.New(c)}
}

// Serve serves one MCP session on t (stdio: &mcp.StdioTransport{}) with
// one sandbox, opened first (a backend that cannot run fails at once)
// and removed, with every process, when the client disconnects or ctx
// ends.
func (s *Server) Serve(ctx context.Context, t mcp.Transport) error {
	h, err := s.newHost(ctx, nil)
	if err != nil {
		return err
	}
	defer h.close()
	return h.server.Run(ctx, t)
}

// sandboxID names the MCP server's sandboxes (one per host).
const sandboxID = "mcp"

// openError keeps a sandbox's open failure, and its hint, for the user.
func openError(err error) error { return fmt.Errorf("mcp: open the sandbox: %w", err) }
