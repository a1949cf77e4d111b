// Package control is gatebridge's control plane: sandboxes and the
// processes in them, transport-neutral. The JSON-RPC server (bridge/rpc)
// maps its requests to these calls and their results back; the MCP
// server and the CLI call them directly, with no JSON in between.
//
// A [Host] opens [Sandbox]es ([Host.Open]): it chooses the backend
// ([Choose]: auto, a name, or a reopened sandbox), starts one long-lived
// sandbox when the backend is a sandbox.Starter, and builds the gates.
// [Sandbox.Start] runs a [Process] in it, with the caller's io.Writers
// for its output, and keeps one session ready ahead of the next process.
// Gates a front end registers at run time live in a [GateSet] (one per
// client); a gate that needs approval is decided by the host's approval
// decider (bridge/approval: a deny, a grant, the gate's setting), which
// asks the sandbox's [Approver].
//
// Errors are *[Error]s with a [Kind] (sorted here, once); a front end
// words them and reads their hint with internal/hint.
package control

import (
	"sync"
	"time"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/bridge/approval"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/sandbox"
)

// Defaults of Options fields left zero.
const (
	DefaultMaxRetainedBytes = 256 << 10 // per stream: the snapshot's head + tail
	DefaultMaxStdinQueued   = 4 << 20   // per process: written but not yet read by it
	DefaultGateTimeout      = 60 * time.Second
	DefaultApprovalTimeout  = 5 * time.Minute
)

// Options configure a Host.
type Options struct {
	// Backends are the sandbox backends offered (nil: none; the program
	// registers them); Settings are what their constructors read.
	// AllowUnsandboxed lets "auto" fall back to an unsandboxed backend.
	Backends         *sandbox.Registry
	Settings         sandbox.Settings
	AllowUnsandboxed bool
	// HowLocal ends the hint when auto finds no usable backend: how to
	// run without a sandbox, in the front end's words.
	HowLocal string
	// Gates makes the gates every sandbox offers besides the runtime
	// ones (built-in and configured ones) for a workspace the sandbox
	// sees at inside, and names each one's kind. nil: none.
	Gates func(workspace, inside string, writable bool) (*gates.Registry, map[string]string, error)
	// CheckWorkspace, when set, may refuse a sandbox's workspace
	// (absolute, its links resolved) before anything is started for it.
	CheckWorkspace func(workspace string, writable bool) error
	// DefaultWorkspace is the workspace the gates are described for
	// before any sandbox is open; "" means the current directory.
	DefaultWorkspace string
	// Approvals configure the one approval decider of the host
	// (bridge/approval): its timeout (approvals.timeout) and max_pending,
	// the grants store, the gates' settings by name (approval: in the
	// config; a gate not named has its own), the command policy checked
	// again at each gate call, the audit of decisions. Approver is not
	// used: each sandbox's Approver (SandboxSpec.Approver) is asked.
	Approvals approval.Config
	// Bridge is the template of every process's session: Dir, Limits,
	// Watch, Audit, Logf. Gates and Approve are set per process.
	Bridge bridge.Config
	// Process is the template of every process's sandbox.Spec: Timeout
	// (when ProcessSpec gives none), KillGrace, Limits, ProtectedPaths,
	// AllowRoot.
	Process sandbox.Spec
	// FSMaxFileBytes bounds a file the file API writes or reads whole
	// ([FS]); 0 means gates.DefaultMaxFileBytes.
	FSMaxFileBytes int64
	// RunAs is the host identity commands of a sandbox with this
	// workspace run as when gatebridge is root; nil means gatebridge's own.
	RunAs func(workspace string) (uid, gid int)
	// MaxCommandBytes bounds a command's argv (a script counts as
	// /bin/sh -c SCRIPT; 0: DefaultMaxCommandBytes), MaxCommands the
	// commands one sandbox starts (0: no limit). The command policy
	// (policy.commands) is Approvals.Commands.
	MaxCommandBytes int64
	MaxCommands     int
	// NamePrefix starts the names of long-lived sandboxes ("rpc").
	NamePrefix string
	// Limits; zero fields take the defaults above.
	MaxRetainedBytes int64
	MaxStdinQueued   int64
	GateTimeout      time.Duration // a runtime gate's answer, without its own
	// Pool is the warm pool (zero: none); Close stops its sandboxes.
	Pool PoolOptions
	// MaxGateCalls caps the gate-call records a process's exit carries
	// (Exit.GateCalls; the rest counted in Exit.GateCallsDropped).
	MaxGateCalls int
	// Logf receives log lines; nil discards them.
	Logf func(format string, args ...any)
}

// Host is the control plane: it opens sandboxes.
type Host struct {
	opts    Options
	pool    *pool // nil: none
	decider *approval.Decider

	mu        sync.Mutex
	bySession map[string]*Process // running processes by bridge session id
}

// New returns a host with opts (zero limits take the defaults).
func New(opts Options) *Host {
	o := &opts
	setDefault(&o.MaxRetainedBytes, DefaultMaxRetainedBytes)
	setDefault(&o.MaxStdinQueued, DefaultMaxStdinQueued)
	setDefault(&o.MaxCommandBytes, DefaultMaxCommandBytes)
	setDefault(&o.MaxGateCalls, DefaultMaxGateCalls)
	setDefault(&o.GateTimeout, DefaultGateTimeout)
	setDefault(&o.Approvals.Timeout, DefaultApprovalTimeout)
	o.Approvals.Approver = nil
	if o.Approvals.NoOne == "" {
		o.Approvals.NoOne = "no one to ask (the sandbox was opened without an Approver)"
	}
	if o.Backends == nil {
		o.Backends = sandbox.NewRegistry()
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.NamePrefix == "" {
		o.NamePrefix = "rpc"
	}
	h := &Host{opts: opts, bySession: map[string]*Process{}, decider: approval.New(o.Approvals)}
	h.pool = newPool(h, opts.Pool)
	return h
}

func setDefault[T int | int64 | time.Duration](p *T, d T) {
	if *p <= 0 {
		*p = d
	}
}

// Decider is the host's approval decider (a front end that asks outside
// a sandbox, or lists what it decided).
func (h *Host) Decider() *approval.Decider { return h.decider }

// Options are the host's options, defaults filled.
func (h *Host) Options() Options { return h.opts }

// processOf is the running process whose session is id (nil: none).
func (h *Host) processOf(id string) *Process {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bySession[id]
}
