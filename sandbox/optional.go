package sandbox

import "context"

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
