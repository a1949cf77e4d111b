//go:build unix

package gates

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/gatebridge/gatebridge/internal/hostilefs"
)

// TestWriteFileOwner (issue 26 item 10): write_file as root left
// root-owned 0755 directories and 0644 files in a user's workspace, which
// neither the owner nor the sandbox (running as the owner) could write.
// What it makes now belongs to the owner of the workspace root; a file it
// replaces keeps its mode, and (where the gates do not act as the owner,
// hostilefs.CanActAsOwner false) its owner and group; acting as the
// owner, it becomes the owner's, as when the sandbox replaces it, and a
// root-owned directory is not written into (TestFileGatesActAsWorkspaceOwner).
func TestWriteFileOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root creates files for another user")
	}
	const uid, gid = 54321, 54322 // no such user here
	ws := t.TempDir()
	must(t, os.Chown(ws, uid, gid))
	writeFile(t, filepath.Join(ws, "theirs"), "old")
	must(t, os.Chown(filepath.Join(ws, "theirs"), 12345, 12346))
	must(t, os.Chmod(filepath.Join(ws, "theirs"), 0o640))
	must(t, os.Mkdir(filepath.Join(ws, "rootdir"), 0o755)) // made by root before this fix
	_, gs := fixture(t, Options{WritableRoot: ws})
	paths := []string{"sub/dir/file", "theirs", "rootdir/new", "top"}
	want := map[string][2]uint32{
		"sub":          {uid, gid},
		"sub/dir":      {uid, gid},
		"sub/dir/file": {uid, gid},
		"top":          {uid, gid},
		"theirs":       {12345, 12346},
		"rootdir":      {0, 0},
		"rootdir/new":  {uid, gid},
	}
	if hostilefs.CanActAsOwner {
		paths = slices.DeleteFunc(paths, func(p string) bool { return p == "rootdir/new" })
		delete(want, "rootdir/new")
		want["theirs"] = [2]uint32{uid, gid}
	}
	for _, p := range paths {
		callGate(t, gs["write_file"], []byte("x"), p).check(t, 0, "", "")
	}
	for rel, want := range want {
		fi, err := os.Lstat(filepath.Join(ws, rel))
		must(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != want[0] || st.Gid != want[1] {
			t.Errorf("%s: owned by %d:%d, want %d:%d", rel, st.Uid, st.Gid, want[0], want[1])
		}
	}
	if fi, _ := os.Stat(filepath.Join(ws, "theirs")); fi.Mode().Perm() != 0o640 {
		t.Errorf("theirs: mode %v, want 0640 kept", fi.Mode().Perm())
	}
}
