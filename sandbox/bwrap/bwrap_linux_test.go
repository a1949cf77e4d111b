package bwrap_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gatebridge/gatebridge/sandbox/bwrap"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

// Another sandbox writing the same workspace can swap a directory the
// host checked (or made) for a symbolic link to a host directory before
// bwrap mounts it; here a hook between the check and bwrap's start
// replaces gen, the parent made for the missing protected gen/hooks, with
// a relative link to /tmp. Mounted by path, gen's bind took the host's /tmp and
// mounted it read-write over the sandbox's own /tmp (the link resolves
// there inside), where the command wrote into a host directory. bwrap now
// mounts what the host opened, so no host directory appears inside.
func TestBwrapProtectedSwappedAfterCheck(t *testing.T) {
	b := newBwrap(t)
	f := sandboxtest.NewFixture(t, sandboxtest.Options{})
	outside, err := os.MkdirTemp("/tmp", "gb-host-dir-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	os.Chmod(outside, 0o777)
	defer bwrap.BeforeStart(func(ws string) {
		if err := os.Rename(filepath.Join(ws, "gen"), filepath.Join(ws, "gen.real")); err != nil {
			t.Error(err)
		}
		// Relative, so that it names /tmp both on the host and inside,
		// where the workspace has the same path.
		rel, err := filepath.Rel(ws, "/tmp")
		if err != nil {
			t.Error(err)
		}
		if err := os.Symlink(rel, filepath.Join(ws, "gen")); err != nil {
			t.Error(err)
		}
	})()
	spec := f.Spec(`echo pwned > ` + outside + `/pwned 2>/dev/null && echo "wrote ` + outside + `/pwned"; exit 0`)
	spec.WorkspaceWritable = true
	spec.ProtectedPaths = []string{"gen/hooks"}
	res, err := b.Run(context.Background(), spec)
	if err != nil {
		t.Logf("run: %v", err) // failing closed is fine
	} else {
		t.Logf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	if _, err := os.Lstat(filepath.Join(outside, "pwned")); err == nil {
		t.Errorf("the command wrote into the host directory %s", outside)
	}
}
