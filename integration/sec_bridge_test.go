package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
	"golang.org/x/sys/unix"
)

// TestSecSessionGroupPrivate: a session handed to the sandbox's uid by
// ownership made bin/ and responses/ readable by the sandbox's group
// (0750, group 65534), so any host user in that group read the responses.
// Now the sandbox's uid alone is let in (a POSIX ACL entry): a third uid
// whose group is the sandbox's can neither list nor read a live session's
// responses, nor write a call.
func TestSecSessionGroupPrivate(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv")
	}
	forEachBackend(t, func(t *testing.T, backend string) {
		sessions := workspace(t)
		must(t, os.Chmod(sessions, 0o711))
		if !fsHasACLs(t, sessions) {
			t.Skipf("the filesystem of %s has no POSIX ACLs: gatebridge falls back to ownership, which shares bin/ and responses/ with the sandbox's group (documented)", sessions)
		}
		cfg := filepath.Join(t.TempDir(), "gatebridge.yaml")
		must(t, os.WriteFile(cfg, []byte("bridge:\n  session_dir: "+sessions+"\n"), 0o644))
		ws := workspace(t) // root's: the command runs as sandbox.uid/gid, 65534
		secret := fmt.Sprintf("GROUP-SECRET-%d", rand.IntN(1000000))
		must(t, os.WriteFile(filepath.Join(ws, "secret"), []byte(secret), 0o600))
		marker := fmt.Sprintf("1.%d", rand.IntN(1000000))
		cmd := exec.Command(binary, "--config", cfg, "run", "--sandbox", backend, "--", "sh", "-c",
			// A call made by hand is never acknowledged: its response stays.
			`C=$GATEBRIDGE_CALLS_DIR; mkdir $C/k $C/k/args; printf read_file > $C/k/gate; printf secret > $C/k/args/0; : > $C/k/ready
while [ ! -f $GATEBRIDGE_RESPONSES_DIR/k.exit ]; do sleep 0.01; done; sleep `+marker)
		cmd.Dir = ws
		must(t, cmd.Start())
		defer cmd.Wait()
		defer func() {
			for _, p := range sleepPids(marker) {
				exec.Command("kill", fmt.Sprint(p)).Run()
			}
		}()
		var session string
		if !sandboxtest.Poll(30*time.Second, func() bool {
			m, _ := filepath.Glob(filepath.Join(sessions, "gb-*", "responses", "k.stdout"))
			for _, f := range m {
				if b, _ := os.ReadFile(f); strings.Contains(string(b), secret) {
					session = filepath.Dir(filepath.Dir(f))
				}
			}
			return session != "" && len(sleepPids(marker)) > 0
		}) {
			cmd.Process.Kill()
			t.Fatalf("no live session holding the response under %s", sessions)
		}
		probe := fmt.Sprintf(`ls %[1]s; ls %[1]s/bin %[1]s/responses; cat %[1]s/responses/k.stdout; echo x > %[1]s/calls/x && echo wrote; echo done`, session)
		third := exec.Command("setpriv", "--reuid=12345", "--regid=65534", "--clear-groups", "sh", "-c", probe)
		b, _ := third.CombinedOutput()
		out := string(b)
		if strings.Contains(out, secret) || strings.Contains(out, "\nk.stdout\n") || strings.Contains(out, "wrote") || !strings.Contains(out, "done") {
			t.Errorf("uid 12345 in the sandbox's group 65534 reached the session: %s", out)
		}
	})
}

// fsHasACLs reports whether dir's filesystem stores POSIX ACLs (an ACL
// with one named user, set on a scratch directory).
func fsHasACLs(t *testing.T, dir string) bool {
	probe, err := os.MkdirTemp(dir, "acl-probe-")
	must(t, err)
	defer os.Remove(probe)
	acl := []byte{2, 0, 0, 0, // version 2; then {tag, perm, id} entries
		1, 0, 7, 0, 0xff, 0xff, 0xff, 0xff, // user::rwx
		2, 0, 4, 0, 0x39, 0x30, 0, 0, // user:12345:r--
		4, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, // group::---
		0x10, 0, 4, 0, 0xff, 0xff, 0xff, 0xff, // mask::r--
		0x20, 0, 0, 0, 0xff, 0xff, 0xff, 0xff} // other::---
	return unix.Setxattr(probe, "system.posix_acl_access", acl, 0) == nil
}
