package rpc_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/bridge/rpc/rpctest"

	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/bwrap"
	"github.com/gatebridge/gatebridge/sandbox/local"
)

// client is a test client on one in-process connection.
type client struct {
	*rpctest.Client
	t      testing.TB
	w      *io.PipeWriter
	done   chan error // Serve's result
	mu     sync.Mutex
	closed bool
}

// testOptions are the server options of the tests: local and bwrap, the
// built-in gates, short gate timeouts.
func testOptions(t testing.TB) Options {
	reg := sandbox.NewRegistry()
	if err := local.Register(reg); err != nil {
		t.Fatal(err)
	}
	if err := bwrap.Register(reg); err != nil {
		t.Fatal(err)
	}
	return Options{Options: control.Options{
		Backends:         reg,
		AllowUnsandboxed: true,
		Gates: func(workspace, inside string, writable bool) (*gates.Registry, map[string]string, error) {
			reg := gates.NewRegistry()
			o := gates.Options{Root: workspace, SandboxRoot: inside}
			if err := gates.RegisterBuiltins(reg, o); err != nil {
				return nil, nil, err
			}
			kinds := map[string]string{}
			for _, s := range reg.Specs() {
				kinds[s.Name] = gates.KindBuiltin
			}
			return reg, kinds, nil
		},
		Process: sandbox.Spec{KillGrace: 500 * time.Millisecond},
		Logf:    t.Logf,
	}}
}

// newClient serves one connection with opts and initializes it.
func newClient(t testing.TB, opts Options) *client {
	t.Helper()
	c := newUninitialized(t, opts)
	c.Initialize()
	return c
}

// newUninitialized serves one connection with opts.
func newUninitialized(t testing.TB, opts Options) *client {
	t.Helper()
	cr, sw := io.Pipe() // server → client
	sr, cw := io.Pipe() // client → server
	c := &client{Client: rpctest.New(t, cr, cw), t: t, w: cw, done: make(chan error, 1)}
	srv := NewServer(opts)
	go func() {
		c.done <- srv.Serve(context.Background(), sr, sw)
		sw.Close()
	}()
	t.Cleanup(func() { c.close() })
	return c
}

// close ends the connection and waits for Serve to return.
func (c *client) close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.w.Close()
	select {
	case err := <-c.done:
		return err
	case <-time.After(30 * time.Second):
		c.t.Errorf("Serve did not return within 30s of the client closing")
		return nil
	}
}

// openSandbox opens a sandbox on backend with a fresh workspace.
func (c *client) openSandbox(id, backend string, writable bool) (string, SandboxOpenResult) {
	c.t.Helper()
	ws := traversableTempDir(c.t)
	var res SandboxOpenResult
	c.Call(MethodSandboxOpen, SandboxOpenParams{SandboxID: id, Backend: backend, Workspace: ws, WritableWorkspace: writable}, &res)
	return ws, res
}

// backends are the backends the process tests run on: local always,
// bwrap and docker when they can run here (CI requires them: see
// GATEBRIDGE_REQUIRE_BACKENDS).
func testBackends(t *testing.T) []string {
	out := []string{local.Name}
	if err := bwrap.New().Check(context.Background()); err == nil {
		out = append(out, bwrap.Name)
	} else if os.Getenv("GATEBRIDGE_REQUIRE_BACKENDS") != "" {
		t.Fatalf("bwrap is required here (GATEBRIDGE_REQUIRE_BACKENDS) but cannot run: %v", err)
	} else {
		t.Logf("bwrap skipped: %v", err)
	}
	return out
}

// sleepers lists host processes whose command line holds marker.
func sleepers(marker string) []string {
	out, _ := exec.Command("pgrep", "-af", marker).Output()
	var ps []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" && !strings.Contains(l, "pgrep") {
			ps = append(ps, l)
		}
	}
	return ps
}

// traversableTempDir is a temp dir that a command running as another uid
// (gatebridge is root: nobody) can reach.
func traversableTempDir(t testing.TB) string {
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	return d
}
