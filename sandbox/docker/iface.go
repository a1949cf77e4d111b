package docker

import (
	"context"

	"github.com/gatebridge/gatebridge/sandbox"
)

// What the docker backend can do beyond running a command: the optional
// interfaces of package sandbox, through which code above the backends
// (serve's sandboxes, run --reuse) reaches it without naming it.
var (
	_ sandbox.Starter         = (*Backend)(nil)
	_ sandbox.Reopener        = (*Backend)(nil)
	_ sandbox.WakeForcer      = (*Backend)(nil)
	_ sandbox.WorkspaceMapper = (*Backend)(nil)

	_ sandbox.Persistent      = (*Sandbox)(nil)
	_ sandbox.WakeForcer      = (*Sandbox)(nil)
	_ sandbox.WorkspaceMapper = (*Sandbox)(nil)
)

// StartSandbox starts a persistent sandbox ([Backend.Start]) with the
// default sessions path and init command.
func (b *Backend) StartSandbox(ctx context.Context, s sandbox.StartSpec) (sandbox.Persistent, error) {
	sb, err := b.Start(ctx, StartOptions{Name: s.Name, SessionsRoot: s.SessionsRoot, Workspace: s.Workspace,
		WorkspaceWritable: s.WorkspaceWritable, UID: s.UID, GID: s.GID, AllowRoot: s.AllowRoot,
		ProtectedPaths: s.ProtectedPaths, Owned: s.Owned})
	if err != nil {
		return nil, err // not a nil *Sandbox in a non-nil interface
	}
	return sb, nil
}

// OpenSandbox returns the running persistent sandbox name ([Backend.Open]).
func (b *Backend) OpenSandbox(ctx context.Context, name string) (sandbox.Persistent, error) {
	sb, err := b.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	return sb, nil
}

// ForcePoll is the wake mode recorded when the sandbox started (or its
// backend's, [Backend.ForcePoll]).
func (s *Sandbox) ForcePoll(ctx context.Context) bool { return s.b.usePoll(ctx) }

// networkFact is the docker network in words ("" for none).
func (b *Backend) networkFact() string {
	if b.cfg.Network == "" || b.cfg.Network == DefaultNetwork {
		return ""
	}
	return "docker network " + b.cfg.Network
}

var (
	_ sandbox.FactsReporter = (*Backend)(nil)
	_ sandbox.FactsReporter = (*Sandbox)(nil)
)

// Facts: a fresh container per command (an empty /tmp each time); the
// network is sandbox.docker.network's.
func (b *Backend) Facts() sandbox.Facts { return sandbox.Facts{Network: b.networkFact()} }

// Facts: one container for every command, so /tmp is kept between them.
func (s *Sandbox) Facts() sandbox.Facts {
	return sandbox.Facts{Network: s.b.networkFact(), TmpKept: true}
}
