package rpc_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/gatebridge/gatebridge/bridge/rpc"

	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

// Pooled sandboxes take no slot of maxSandboxes until a sandbox/open
// takes one: with a cap of 1 and 2 pooled, one sandbox opens (taken from
// the pool), a second is refused for the cap.
func TestPoolCountsOnlyTaken(t *testing.T) {
	opts := testOptions(t)
	local, err := opts.Backends.Lookup("local")
	if err != nil {
		t.Fatal(err)
	}
	inner, err := local.New(sandbox.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	st := &starter{inner: inner}
	if err := opts.Backends.Register(sandbox.BackendEntry{Name: "starter", Strength: 0,
		New: func(sandbox.Settings) (sandbox.Backend, error) { return st, nil }}); err != nil {
		t.Fatal(err)
	}
	opts.MaxSandboxes = 1
	opts.Pool = control.PoolOptions{Size: 2}
	c := newClient(t, opts)
	ws := traversableTempDir(t)
	c.Call(MethodSandboxOpen, SandboxOpenParams{SandboxID: "seed", Backend: "starter", Workspace: ws}, nil)
	c.Call(MethodSandboxClose, SandboxCloseParams{SandboxID: "seed"}, nil)
	pooled := func() int {
		st.mu.Lock()
		defer st.mu.Unlock()
		n := 0
		for _, sp := range st.started {
			if strings.HasSuffix(sp.Name, "-pool") {
				n++
			}
		}
		return n
	}
	if !sandboxtest.Poll(time.Minute, func() bool { return pooled() == 2 }) {
		t.Fatalf("the pool started %d sandboxes, want 2", pooled())
	}
	c.Call(MethodSandboxOpen, SandboxOpenParams{SandboxID: "a", Backend: "starter", Workspace: ws}, nil)
	if o := c.Run("a", "p", nil, "true"); o.Exited.ExitCode != 0 {
		t.Fatalf("exit %+v", o.Exited)
	}
	e := c.CallErr(MethodSandboxOpen, SandboxOpenParams{SandboxID: "b", Backend: "starter", Workspace: ws})
	if e == nil || e.Code != CodeLimit {
		t.Fatalf("second sandbox past maxSandboxes 1: %+v", e)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, sp := range st.started {
		if strings.HasSuffix(sp.Name, "-a") {
			t.Fatalf("sandbox a started its own (%s), not one of the pool", sp.Name)
		}
	}
}
