package docker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

// tags maps a subtest name to the label of its backend's containers.
var tags sync.Map

// noLeftovers checks the host for processes with marker (the local engine
// runs container processes on this host) and that no container of the
// subtest's backend remains.
func noLeftovers(t *testing.T, marker string) {
	sandboxtest.HostNoLeftovers(t, marker)
	tag, ok := tags.Load(t.Name())
	if !ok {
		t.Fatalf("no backend for %s", t.Name())
	}
	if ids := containersWith(t, engine(t), tag.(string)); len(ids) != 0 {
		t.Errorf("containers left after Run returned: %v", ids)
	}
}

func TestConformance(t *testing.T) {
	engine(t)
	sandboxtest.Run(t, func(t *testing.T) sandbox.Backend {
		b, tag := newBackend(t, Config{})
		tags.Store(t.Name(), tag)
		return b
	}, sandboxtest.Options{Isolated: true, NoLeftovers: noLeftovers})
}

// TestConformancePersistent runs the suite against exec mode. Its fixture
// lives under t.TempDir, so each subtest gets a sandbox whose sessions root
// is the fixture's parent; the isolation checks that need per-session
// read-only mounts are expected to hold thanks to the ownership mitigation
// (root host only).
func TestConformancePersistent(t *testing.T) {
	if os.Getenv("GATEBRIDGE_DOCKER_PERSISTENT_SUITE") == "" {
		t.Skip("set GATEBRIDGE_DOCKER_PERSISTENT_SUITE=1: needs a sessions root covering the suite's temp dirs")
	}
	b, _ := newBackend(t, Config{})
	root := os.TempDir()
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	name := "conformance-" + strings.ReplaceAll(filepath.Base(t.TempDir()), "_", "-")
	sb, err := b.Start(context.Background(), StartOptions{Name: name, SessionsRoot: root, Workspace: root, WorkspaceWritable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background(), name) })
	sandboxtest.Run(t, func(t *testing.T) sandbox.Backend { return sb }, sandboxtest.Options{Isolated: false})
}
