package sandbox

import (
	"context"
	"errors"
)

// The optional interfaces: what only some backends can do. Each has one
// method, is found by a type assertion on a [Backend] (as net/http finds
// an http.Flusher), and every implementation carries a compile-time guard
// (var _ sandbox.Starter = (*docker.Backend)(nil)). Code above the
// backends asks for an ability, never for a concrete backend.

// Checker is implemented by backends that can tell whether they can run on
// this machine (for `--sandbox auto` and `gatebridge doctor`).
type Checker interface {
	// Check returns nil when the backend can run, else an [*Error] whose
	// Help says how to fix it.
	Check(ctx context.Context) error
}

// WorkspaceMapper is implemented by backends that show the host workspace
// at another path inside (docker: /workspace). ok is false when host is
// not visible inside.
type WorkspaceMapper interface {
	WorkspaceInside(host string) (inside string, ok bool)
}

// WakeForcer is implemented by backends whose commands a FIFO wake-up may
// not reach (Docker Desktop runs containers in a VM that FIFOs do not
// cross). ForcePoll reports whether the gate wrappers must poll for their
// answers instead; it may ask the engine once, within ctx. bridge's
// Session.Run then sets the wrappers' wake mode to poll.
type WakeForcer interface {
	ForcePoll(ctx context.Context) bool
}

// SessionsRooter is implemented by backends that reach only the sessions
// made under one host directory (a persistent docker sandbox mounts its
// sessions root once, at start): a session for its commands must be
// created under SessionsRoot().
type SessionsRooter interface {
	SessionsRoot() string
}

// Starter is implemented by backends that can keep one long-lived sandbox
// (a container) for many commands, instead of one per command. The
// caller stops what StartSandbox returns ([Persistent.Stop]) and closes
// it ([Close]).
type Starter interface {
	StartSandbox(ctx context.Context, s StartSpec) (Persistent, error)
}

// Reopener is implemented by backends whose long-lived sandboxes can be
// found again by name, by another process (`gatebridge run --reuse`).
type Reopener interface {
	OpenSandbox(ctx context.Context, name string) (Persistent, error)
}

// Warmer is implemented by long-lived sandboxes ([Persistent]) that can
// ready themselves for their first command ahead of it (docker: its
// agent dialled), as a warm pool wants them.
type Warmer interface {
	Warm(ctx context.Context) error
}

// Persistent is a long-lived sandbox a [Starter] started: a [Backend] that
// runs each command in it. The sessions of its commands must be created
// under SessionsRoot.
type Persistent interface {
	Backend
	SessionsRooter
	// Workspace is the host workspace it was started with ("": none).
	Workspace() string
	// Stop removes the sandbox (and everything still running in it).
	Stop(ctx context.Context) error
}

// StartSpec describes a long-lived sandbox to start ([Starter]). Its image,
// limits and user are the backend's own configuration.
type StartSpec struct {
	// Name identifies the sandbox among the backend's (docker: the
	// container gatebridge-<Name>).
	Name string
	// SessionsRoot is the host directory under which every session run in
	// the sandbox must live; it is mounted once, read-write.
	SessionsRoot string
	// Workspace is an optional host directory the sandbox sees, read-only
	// unless WorkspaceWritable; ProtectedPaths stay read-only in it
	// ([Spec.ProtectedPaths]).
	Workspace         string
	WorkspaceWritable bool
	ProtectedPaths    []string
	// UID and GID are the identity commands run as when gatebridge is root
	// ([Spec.UID]); uid 0 is refused unless AllowRoot.
	UID, GID  int
	AllowRoot bool
	// Owned ties the sandbox to this process: it is not reopened by name,
	// and a later prune removes it once this process is gone (a protocol
	// server that crashed). Without it the sandbox lives until stopped.
	Owned bool
}

// Facts are what a command in a backend's sandbox can count on beyond
// its workspace, for the texts that describe the shell to a model (the
// capability text, the MCP tool's description).
type Facts struct {
	// Network is what commands can reach, in words ("the host's
	// network", "docker network bridge"); "" is none (at most a
	// loopback of their own).
	Network string
	// TmpKept: files in /tmp outlive the command that wrote them (one
	// sandbox for every command, or the host's /tmp); else each command
	// gets an empty /tmp.
	TmpKept bool
	// TmpHost: /tmp is the host's own, shared with its other programs.
	TmpHost bool
	// Unconfined: commands run as the host's processes; a read-only
	// workspace is not enforced.
	Unconfined bool
}

// FactsReporter is a backend (or a started sandbox) that states its
// Facts. A backend that does not is described without them.
type FactsReporter interface {
	Facts() Facts
}

// TTYRunner is implemented by backends that can run a command on a
// pseudo-terminal ([Spec.TTY]). TTYSupport returns nil when this one can,
// else an [*Error] saying why not (a long-lived sandbox whose agent
// cannot open one). A backend that is not a TTYRunner cannot.
type TTYRunner interface {
	TTYSupport() error
}

// Arg0Runner is implemented by backends that can give a command an
// argv[0] of its own ([Spec.Arg0]). Arg0Support returns nil when this one
// can, else an [*Error] saying why not (bubblewrap before 0.9 has no
// --argv0). A backend that is not an Arg0Runner cannot.
type Arg0Runner interface {
	Arg0Support() error
}

// CheckSpecSupport returns an [*Error] naming b when spec asks for a
// terminal ([Spec.TTY]) or an argv[0] ([Spec.Arg0]) b cannot give, nil
// otherwise. Backends call it first in Run; the control plane calls it
// before anything starts.
func CheckSpecSupport(b Backend, spec *Spec) error {
	if spec.TTY != nil {
		if err := TTYSupport(b); err != nil {
			return err
		}
	}
	if spec.Arg0 != "" {
		if err := Arg0Support(b); err != nil {
			return err
		}
	}
	return nil
}

// TTYSupport is b's [TTYRunner.TTYSupport], or an [*Error] naming b when
// b is not a TTYRunner.
func TTYSupport(b Backend) error {
	if r, ok := b.(TTYRunner); ok {
		return r.TTYSupport()
	}
	return &Error{Backend: b.Name(), Op: "run on a terminal", Err: errors.New("this backend cannot run a command on a pseudo-terminal"),
		Help: "start the process without tty, or use a backend that can (local, bwrap, docker)"}
}

// Arg0Support is b's [Arg0Runner.Arg0Support], or an [*Error] naming b
// when b is not an Arg0Runner.
func Arg0Support(b Backend) error {
	if r, ok := b.(Arg0Runner); ok {
		return r.Arg0Support()
	}
	return &Error{Backend: b.Name(), Op: "set argv[0]", Err: errors.New("this backend cannot give a command an argv[0] of its own"),
		Help: "start the process without arg0, or use a backend that can (local; docker with the Go agent, as serve runs it)"}
}
