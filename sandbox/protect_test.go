package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// The parents a backend binds onto themselves: each directory between the
// workspace and a protected path, once, parents first, except those that
// are protected paths or lie under one.
func TestProtectedParents(t *testing.T) {
	ps := []Protected{{Rel: ".git"}, {Rel: "tools/hooks"}, {Rel: "a/b/c"}, {Rel: "a/b"}, {Rel: "x/y/z"}, {Rel: "x/y/w"}, {Rel: "p"}, {Rel: "p/q/r"}}
	got := ProtectedParents(ps)
	want := []string{"a", "tools", "x", "x/y"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := ProtectedParents([]Protected{{Rel: ".git"}}); len(got) != 0 {
		t.Errorf("top-level only: got %q", got)
	}
}

// PrepareProtected makes the missing parents of a missing protected path
// like the directory they are made in (mode, and owner when root), not
// the path itself, and follows no link the command may have put on the
// way since the check.
func TestPrepareProtected(t *testing.T) {
	ws := t.TempDir()
	if err := os.Chmod(ws, 0o770); err != nil {
		t.Fatal(err)
	}
	root := os.Geteuid() == 0
	if root {
		if err := os.Chown(ws, 4321, 4322); err != nil {
			t.Fatal(err)
		}
	}
	ps, err := ProtectedPaths("bwrap", &Spec{Workspace: ws, WorkspaceWritable: true, ProtectedPaths: []string{"gen/sub/hooks"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := PrepareProtected("bwrap", ps); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"gen", "gen/sub"} {
		fi, err := os.Lstat(filepath.Join(ws, d))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != os.ModeDir|0o770 {
			t.Errorf("%s: mode %v, want drwxrwx---", d, fi.Mode())
		}
		if st := fi.Sys().(*syscall.Stat_t); root && (st.Uid != 4321 || st.Gid != 4322) {
			t.Errorf("%s: owner %d:%d, want the workspace's 4321:4322", d, st.Uid, st.Gid)
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, "gen/sub/hooks")); err == nil {
		t.Error("the protected path itself was made (the backend makes its mount point)")
	}
	CleanupProtected(ps)
	if _, err := os.Lstat(filepath.Join(ws, "gen")); err == nil {
		t.Error("gen left after cleanup")
	}
	// Since the check, the command made l2, a missing parent, a link to
	// a host directory.
	outside := t.TempDir()
	ps, err = ProtectedPaths("bwrap", &Spec{Workspace: ws, WorkspaceWritable: true, ProtectedPaths: []string{"l2/sub/hooks"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "l2")); err != nil {
		t.Fatal(err)
	}
	if err := PrepareProtected("bwrap", ps); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("through a link: %v, want a symbolic link refusal", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("made %v in the link's target", ents)
	}
}
