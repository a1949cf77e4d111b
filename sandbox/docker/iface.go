package docker

import (
	"context"
	"errors"
	"time"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/agent"
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

var (
	_ sandbox.TTYRunner  = (*Sandbox)(nil)
	_ sandbox.Arg0Runner = (*Sandbox)(nil)
)

// TTYSupport: a long-lived sandbox runs a command on a terminal only
// through the Go agent, which opens one inside; not through docker exec
// (whose wrapper starts the command in a session of its own, away from
// the terminal) nor the sh agent.
func (s *Sandbox) TTYSupport() error {
	c, err := s.agentFor("run on a terminal")
	if err != nil {
		return err
	}
	if err := c.TTYSupport(); err != nil {
		return &sandbox.Error{Backend: "docker", Op: "run on a terminal in " + s.name, Err: err, Help: hintOf(err)}
	}
	return nil
}

// Arg0Support: as TTYSupport, only through the Go agent.
func (s *Sandbox) Arg0Support() error {
	c, err := s.agentFor("set argv[0]")
	if err != nil {
		return err
	}
	if err := c.Arg0Support(); err != nil {
		return &sandbox.Error{Backend: "docker", Op: "set argv[0] in " + s.name, Err: err, Help: hintOf(err)}
	}
	return nil
}

func (s *Sandbox) agentFor(what string) (*agent.Conn, error) {
	if s.agentDir == "" {
		return nil, &sandbox.Error{Backend: "docker", Op: what + " in " + s.name,
			Err:  errors.New("a long-lived docker sandbox without the agent runs commands through docker exec, which cannot"),
			Help: "start the process without it, or run the sandbox with the Go agent (sandbox.docker.agent)"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.agentConn(ctx)
}

func hintOf(err error) string {
	var h interface{ Hint() string }
	if errors.As(err, &h) {
		return h.Hint()
	}
	return ""
}
