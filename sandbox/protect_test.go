package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A protected path reached through a symbolic link (a writable workspace
// may have made "tools" a link to a host directory in an earlier run) is
// refused: bwrap and docker resolve the source on the host and would mount
// the link's target inside.
func TestProtectedPathsRefuseLinks(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	if err := os.MkdirAll(filepath.Join(outside, "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "tools")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, ".git")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"tools/hooks", ".git", "tools/missing"} {
		_, err := ProtectedPaths("bwrap", &Spec{Workspace: ws, WorkspaceWritable: true, ProtectedPaths: []string{p}})
		if err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("%s: err %v, want a symbolic link refusal", p, err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ProtectedPaths("bwrap", &Spec{Workspace: ws, WorkspaceWritable: true, ProtectedPaths: []string{"file/x"}}); err == nil {
		t.Error("file/x under a regular file: no error")
	}
}

// A missing protected path is a mount point the backend creates, with its
// missing parents; CleanupProtected removes exactly those when they are
// empty, never following a link the command left on the way.
func TestCleanupProtected(t *testing.T) {
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	ps, err := ProtectedPaths("bwrap", &Spec{Workspace: ws, WorkspaceWritable: true, ProtectedPaths: []string{"a/b/c", "d"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || !ps[0].Missing || !ps[1].Missing {
		t.Fatalf("%+v", ps)
	}
	// What the backend makes for the mounts.
	for _, d := range []string{"a/b/c", "d"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	CleanupProtected(ps)
	for _, gone := range []string{"a/b", "d"} {
		if _, err := os.Lstat(filepath.Join(ws, gone)); err == nil {
			t.Errorf("%s left behind", gone)
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, "a")); err != nil {
		t.Errorf("a existed before and was removed: %v", err)
	}

	// The command replaced a/b with a link to a host directory holding an
	// empty c: it stays.
	outside := t.TempDir()
	if err := os.Mkdir(filepath.Join(outside, "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "a", "b")); err != nil {
		t.Fatal(err)
	}
	CleanupProtected(ps[:1])
	if _, err := os.Lstat(filepath.Join(outside, "c")); err != nil {
		t.Errorf("removed through a link: %v", err)
	}
}
