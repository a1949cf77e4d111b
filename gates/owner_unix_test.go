//go:build unix

package gates

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWriteFileOwner (issue 26 item 10): write_file as root left
// root-owned 0755 directories and 0644 files in a user's workspace, which
// neither the owner nor the sandbox (running as the owner) could write.
// What it makes now belongs to the owner of the workspace root; a file it
// replaces keeps its owner, group and mode.
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
	for _, p := range []string{"sub/dir/file", "theirs", "rootdir/new", "top"} {
		callGate(t, gs["write_file"], []byte("x"), p).check(t, 0, "", "")
	}
	for rel, want := range map[string][2]uint32{
		"sub":          {uid, gid},
		"sub/dir":      {uid, gid},
		"sub/dir/file": {uid, gid},
		"top":          {uid, gid},
		"theirs":       {12345, 12346},
		"rootdir":      {0, 0},
		"rootdir/new":  {uid, gid},
	} {
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
