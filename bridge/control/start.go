package control

import (
	"context"

	"time"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/internal/hostilefs"
	"github.com/gatebridge/gatebridge/sandbox"
)

// RootRemover is a backend that can remove a sessions root a failed
// start made, unless a sandbox uses it after all (docker).
type RootRemover interface {
	RemoveUnusedRoot(ctx context.Context, root string) error
}

// StartNamed starts the long-lived sandbox s.Name on b (gatebridge
// sandbox start): the backend checked first (the engine, the image), so
// that a start that fails there leaves nothing behind; then its sessions
// root (s.SessionsRoot, "" for its own default one) made private; then
// the sandbox. A root this start made goes with a failed start (logf
// says when it cannot). A root refused is a *bridge.SessionsRootError.
// It returns the sandbox and its sessions root.
func StartNamed(ctx context.Context, b sandbox.Backend, s sandbox.StartSpec, logf func(format string, args ...any)) (sandbox.Persistent, string, error) {
	st, ok := b.(sandbox.Starter)
	if !ok {
		return nil, "", errorf(KindInvalid, "backend %s cannot start a long-lived sandbox", b.Name())
	}
	if s.SessionsRoot == "" {
		root, err := bridge.SandboxSessionsRoot(s.Name)
		if err != nil {
			return nil, "", err
		}
		s.SessionsRoot = root
	}
	if c, ok := b.(sandbox.Checker); ok {
		if err := c.Check(ctx); err != nil { // engine, image (pull attempt)
			return nil, "", err
		}
	}
	root, created, err := bridge.PrepareSessionsRoot(s.SessionsRoot)
	if err != nil {
		if created {
			hostilefs.RemoveTree(root)
		}
		return nil, "", err
	}
	s.SessionsRoot = root
	sb, err := st.StartSandbox(ctx, s)
	if err != nil {
		if r, ok := b.(RootRemover); ok && created {
			// Not there before this start: it goes with it (a root this
			// start did not make may be another sandbox's).
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			if rerr := r.RemoveUnusedRoot(cctx, root); rerr != nil {
				logf("gatebridge: could not remove the sessions root %s: %v (`gatebridge prune` retries)", root, rerr)
			}
			cancel()
		}
		return nil, "", err
	}
	return sb, root, nil
}
