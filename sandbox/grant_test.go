package sandbox

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestGrantSessionOwnersResponsesReadable: handed over by ownership (no
// ACLs: a filesystem without them, or gVisor, which ignores them), a
// response the host writes later in responses/ must belong to the
// container user's group, which the 0640 file lets read. Without the
// setgid bit on responses/ it was gatebridge's own group, and the
// wrapper inside could not open its answer.
func TestGrantSessionOwnersResponsesReadable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to hand a session to another uid")
	}
	root := t.TempDir()
	d := SessionDirs{Root: root, Bin: filepath.Join(root, "bin"), Calls: filepath.Join(root, "calls"),
		Responses: filepath.Join(root, "responses"), Tmp: filepath.Join(root, "tmp")}
	for _, p := range []string{d.Bin, d.Calls, d.Responses, d.Tmp} {
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	const uid, gid = 65534, 65533
	if err := GrantSessionOwners(d, uid, gid); err != nil {
		t.Fatal(err)
	}
	resp := filepath.Join(d.Responses, "c1.exit")
	if err := os.WriteFile(resp, []byte("0"), 0o640); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		uid  int
		gid  int
	}{{d.Calls, uid, gid}, {d.Tmp, uid, gid}, {d.Responses, 0, gid}, {d.Bin, 0, gid}, {resp, 0, gid}} {
		fi, err := os.Lstat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) != c.uid || int(st.Gid) != c.gid {
			t.Errorf("%s is %d:%d, want %d:%d", c.path, st.Uid, st.Gid, c.uid, c.gid)
		}
		if fi.Mode().Perm()&0o002 != 0 || (c.path != d.Calls && c.path != d.Tmp && fi.Mode().Perm()&0o020 != 0) {
			t.Errorf("%s is writable by others or the group: %v", c.path, fi.Mode())
		}
	}
}
