//go:build linux

package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/agent"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

// startAgent prepares a directory, runs a real agent on it in this
// process, and dials it.
func startAgent(t *testing.T) (*agent.Conn, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "agent")
	if err := agent.Prepare(dir, -1, -1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- agent.Serve(ctx, agent.Options{Dir: dir}) }()
	c, err := agent.Dial(context.Background(), dir, agent.DialOptions{Wait: 5 * time.Second})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		cancel()
		if err := <-served; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	return c, dir
}

// writable runs every spec with a writable workspace: an attached
// sandbox's mounts are its own (the suite's isolation checks are off).
type writable struct{ *agent.Attached }

func (w writable) Run(ctx context.Context, spec *sandbox.Spec) (*sandbox.Result, error) {
	s := *spec
	s.WorkspaceWritable = true
	s.AllowRoot = true // the test runs as root, and so does its agent
	return w.Attached.Run(ctx, &s)
}

func TestConformance(t *testing.T) {
	c, _ := startAgent(t)
	sandboxtest.Run(t, func(*testing.T) sandbox.Backend {
		return writable{&agent.Attached{Conn: c, Root: "/"}}
	}, sandboxtest.Options{})
}

func TestMain(m *testing.M) {
	os.Exit(m.Run())
}
