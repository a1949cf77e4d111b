package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestSecBwrapNoNestedUserns: inside bwrap a command could create a user
// namespace of its own (`unshare -Urm`), where it holds every capability
// over its own mounts: it mounted a 1 GiB tmpfs past sandbox.limits.tmp_size
// and reached the kernel's namespaced-root attack surface. bwrap now runs
// with --disable-userns; the read-only binds stay read-only either way.
func TestSecBwrapNoNestedUserns(t *testing.T) {
	needBackend(t, "bwrap")
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1) on this host for the attack")
	}
	ws := workspace(t)
	must(t, os.MkdirAll(filepath.Join(ws, ".git"), 0o755))
	must(t, os.WriteFile(filepath.Join(ws, ".git", "config"), []byte("[core]\n"), 0o644))
	if os.Geteuid() == 0 {
		must(t, exec.Command("chown", "-R", "4321:4321", ws).Run())
	}
	cfg := "sandbox:\n  limits:\n    tmp_size: 8388608\n"
	script := `unshare -Urm true 2>/dev/null && echo USERNS
unshare -Urm sh -c 'mount -t tmpfs -o size=1g none /tmp && dd if=/dev/zero of=/tmp/f bs=1048576 count=16 2>/dev/null && echo BIGTMP' 2>/dev/null
unshare -Urm sh -c 'umount .git 2>/dev/null; mount -o remount,rw .git 2>/dev/null; echo pwned >> .git/config && echo GIT' 2>/dev/null
touch newfile && echo wrote`
	out := gb(t, "bwrap", Run{Dir: ws, Config: cfg, Args: []string{"--writable-workspace"}, Command: []string{"sh", "-c", script}})
	if out.Stdout != "wrote\n" {
		t.Errorf("stdout %q (want only wrote), stderr %q", out.Stdout, out.Stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); string(b) != "[core]\n" {
		t.Errorf(".git/config changed: %q", b)
	}
}
