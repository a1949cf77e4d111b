package docker

import (
	"context"

	"github.com/gatebridge/gatebridge/sandbox"
)

// What the docker backend can do beyond running a command: the optional
// interfaces of package sandbox, through which code above the backends
// reaches it without naming it.
var (
	_ sandbox.WakeForcer      = (*Backend)(nil)
	_ sandbox.WorkspaceMapper = (*Backend)(nil)

	_ sandbox.WakeForcer      = (*Sandbox)(nil)
	_ sandbox.WorkspaceMapper = (*Sandbox)(nil)
)

// ForcePoll is the wake mode recorded when the sandbox started (or its
// backend's, [Backend.ForcePoll]).
func (s *Sandbox) ForcePoll(ctx context.Context) bool { return s.b.usePoll(ctx) }
