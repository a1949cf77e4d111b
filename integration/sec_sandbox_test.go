//go:build linux

package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
	"golang.org/x/sys/unix"
)

// procUID returns the host uid of the process `sleep marker`, or -1.
func procUID(marker string) int {
	for _, pid := range sleepPids(marker) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 3 && f[0] == "Uid:" {
				n, _ := strconv.Atoi(f[2]) // effective
				return n
			}
		}
	}
	return -1
}

// TestSecNoHostRoot: started as root, the review's command ran as the
// host's root under bwrap, made a setuid-root copy of sh on the host and
// read root's keyring. Now the command's processes are not uid 0 on the
// host, and nothing it writes is a setuid-root file or a device.
func TestSecNoHostRoot(t *testing.T) {
	needRoot(t)
	forEachIsolating(t, func(t *testing.T, backend string) {
		ws := workspace(t)
		os.Chmod(ws, 0o777) // root-owned: the command runs as 65534 and may write
		marker := fmt.Sprintf("1.%d", rand.IntN(1000000))
		script := `id -u
cp /bin/sh "$TMPDIR/sh" && chmod 4755 "$TMPDIR/sh"
cp /bin/sh ./sush 2>/dev/null && chmod 4755 ./sush
mknod ./null c 1 3 2>/dev/null && echo MKNOD
sleep ` + marker
		cmd := exec.Command(binary, "run", "--sandbox", backend, "--writable-workspace", "--", "sh", "-c", script)
		cmd.Dir = ws
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		must(t, cmd.Start())
		uid := -1
		sandboxtest.Poll(20*time.Second, func() bool { uid = procUID(marker); return uid >= 0 })
		err := cmd.Wait()
		if uid == 0 || uid < 0 {
			t.Errorf("host uid of the sandboxed command: %d (want non-root; -1: not seen)", uid)
		}
		if err != nil || strings.Contains(so.String(), "MKNOD") {
			t.Errorf("err %v, stdout %q, stderr %q", err, so.String(), se.String())
		}
		if strings.HasPrefix(so.String(), "0\n") {
			t.Errorf("id -u inside is 0")
		}
		filepath.Walk(ws, func(p string, fi os.FileInfo, err error) error {
			if err != nil {
				return nil
			}
			st := fi.Sys().(*syscall.Stat_t)
			if fi.Mode()&os.ModeSetuid != 0 && st.Uid == 0 {
				t.Errorf("%s is setuid root on the host", p)
			}
			if fi.Mode()&(os.ModeDevice|os.ModeCharDevice) != 0 {
				t.Errorf("%s is a device on the host", p)
			}
			return nil
		})
	})
}

// TestSecEtcPrivate: the /etc allowlist must not carry files that are not
// world-readable (the review read /etc/ssl/private/*.key).
func TestSecEtcPrivate(t *testing.T) {
	needRoot(t)
	needBackend(t, "bwrap")
	dir := "/etc/ssl/private"
	if _, err := os.Stat(dir); err != nil {
		must(t, os.MkdirAll(dir, 0o710))
		t.Cleanup(func() { os.Remove(dir) })
	}
	key := filepath.Join(dir, fmt.Sprintf("gb-test-%d.key", rand.IntN(1000000)))
	must(t, os.WriteFile(key, []byte("PRIVATE-KEY-MATERIAL"), 0o600))
	t.Cleanup(func() { os.Remove(key) })
	for _, cfg := range []string{"", "sandbox:\n  allow_root: true\n  uid: 0\n  gid: 0\n"} {
		out := gb(t, "bwrap", Run{Config: cfg, Command: []string{"sh", "-c", "cat " + key + " /etc/ssl/private/* 2>/dev/null; ls /etc/ssl/private 2>/dev/null; id -u"}})
		if strings.Contains(out.Stdout, "PRIVATE-KEY") || strings.Contains(out.Stdout, "gb-test-") {
			t.Errorf("config %q: a private key is readable inside: %q", cfg, out.Stdout)
		}
		if cfg != "" && !strings.HasSuffix(out.Stdout, "0\n") {
			t.Errorf("allow_root did not run as root: %q %q", out.Stdout, out.Stderr)
		}
	}
}

// TestSecKeyringUnreachable: a key in the invoker's session keyring is not
// visible in /proc/keys inside (the review listed and cleared root's).
func TestSecKeyringUnreachable(t *testing.T) {
	needRoot(t)
	needBackend(t, "bwrap")
	desc := fmt.Sprintf("gb-test-key-%d", rand.IntN(1000000))
	id, err := unix.AddKey("user", desc, []byte("secret"), unix.KEY_SPEC_SESSION_KEYRING)
	if err != nil {
		t.Skipf("cannot add a key here: %v", err)
	}
	t.Cleanup(func() { unix.KeyctlInt(unix.KEYCTL_REVOKE, id, 0, 0, 0) })
	if b, _ := os.ReadFile("/proc/keys"); !strings.Contains(string(b), desc) {
		t.Skip("the test's own key is not in /proc/keys")
	}
	out := gb(t, "bwrap", Run{Command: []string{"sh", "-c", "cat /proc/keys; echo end"}})
	if !strings.Contains(out.Stdout, "end") || strings.Contains(out.Stdout, desc) {
		t.Errorf("the invoker's key is visible inside: %q (stderr %q)", out.Stdout, out.Stderr)
	}
}

// TestSecProtectedPaths: with a writable workspace the review rewrote
// .git/config (core.fsmonitor) and added .git/hooks, which the host runs
// at its next git command. .git stays read-only inside, and a missing
// protected path cannot be created. As root, the command runs as the
// workspace's owner, so writes work and new files are the owner's.
func TestSecProtectedPaths(t *testing.T) {
	forEachIsolating(t, func(t *testing.T, backend string) {
		ws := workspace(t)
		must(t, os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755))
		must(t, os.WriteFile(filepath.Join(ws, ".git", "config"), []byte("[core]\n"), 0o644))
		owner := os.Geteuid()
		if owner == 0 {
			owner = 4321
			must(t, exec.Command("chown", "-R", "4321:4321", ws).Run())
		}
		cfg := "sandbox:\n  protected_paths: [.git, .hg]\n"
		script := `printf '[core]\n\tfsmonitor = id > /tmp/pwned\n' >> .git/config 2>/dev/null && echo CONFIG
printf '#!/bin/sh\nid\n' > .git/hooks/pre-commit 2>/dev/null && echo HOOK
mv .git .git-old 2>/dev/null && echo MOVED
rm -rf .git 2>/dev/null; [ -d .git ] || echo REMOVED
mkdir -p .hg/hooks 2>/dev/null && echo HG
touch newfile && echo wrote`
		out := gb(t, backend, Run{Dir: ws, Config: cfg, Args: []string{"--writable-workspace"}, Command: []string{"sh", "-c", script}})
		if out.Stdout != "wrote\n" {
			t.Errorf("stdout %q (want only wrote), stderr %q", out.Stdout, out.Stderr)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); string(b) != "[core]\n" {
			t.Errorf(".git/config changed: %q", b)
		}
		if _, err := os.Lstat(filepath.Join(ws, ".git", "hooks", "pre-commit")); err == nil {
			t.Error("a hook was planted")
		}
		if _, err := os.Lstat(filepath.Join(ws, ".hg")); err == nil {
			t.Error(".hg was left in the workspace")
		}
		if fi, err := os.Stat(filepath.Join(ws, "newfile")); err != nil {
			t.Error(err)
		} else if uid := fi.Sys().(*syscall.Stat_t).Uid; int(uid) != owner {
			t.Errorf("new file owned by uid %d, want the workspace owner %d", uid, owner)
		}
	})
}

// TestSecNestedProtectedPaths: with sandbox.protected_paths [.git,
// tools/hooks], the command renamed tools (the read-only mount of
// tools/hooks went with it) and made a new tools/hooks with a hook that
// host tools would run. The parents of nested protected paths are mount
// points inside, which cannot be renamed; a missing parent (gen, of
// gen/hooks) is made for the run as the workspace owner's, so writes in
// it work, and the empty mount point is gone afterwards.
func TestSecNestedProtectedPaths(t *testing.T) {
	forEachIsolating(t, func(t *testing.T, backend string) {
		ws := workspace(t)
		must(t, os.MkdirAll(filepath.Join(ws, "tools", "hooks"), 0o755))
		must(t, os.WriteFile(filepath.Join(ws, "tools", "hooks", "pre-commit"), []byte("orig\n"), 0o755))
		owner := os.Geteuid()
		if owner == 0 {
			owner = 4321
			must(t, exec.Command("chown", "-R", "4321:4321", ws).Run())
		}
		before, err := os.Lstat(filepath.Join(ws, "tools", "hooks"))
		must(t, err)
		cfg := "sandbox:\n  protected_paths: [.git, tools/hooks, gen/hooks]\n"
		script := `mv tools tools2 2>/dev/null && echo MOVED
mv gen gen2 2>/dev/null && echo MOVED-GEN
mkdir -p tools/hooks gen/hooks 2>/dev/null
echo evil > tools/hooks/pre-commit 2>/dev/null && echo HOOK
echo evil > gen/hooks/pre-commit 2>/dev/null && echo GEN-HOOK
echo ok > tools/new && echo ok > gen/new && echo wrote`
		out := gb(t, backend, Run{Dir: ws, Config: cfg, Args: []string{"--writable-workspace"}, Command: []string{"sh", "-c", script}})
		if out.Stdout != "wrote\n" {
			t.Errorf("stdout %q (want only wrote), stderr %q", out.Stdout, out.Stderr)
		}
		if fi, err := os.Lstat(filepath.Join(ws, "tools", "hooks")); err != nil || !os.SameFile(fi, before) {
			t.Errorf("tools/hooks is not the protected directory any more (%v)", err)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "tools", "hooks", "pre-commit")); string(b) != "orig\n" {
			t.Errorf("tools/hooks/pre-commit is %q", b)
		}
		for _, p := range []string{"tools2", "gen2", "gen/hooks"} {
			if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
				t.Errorf("%s is in the workspace after the run", p)
			}
		}
		if fi, err := os.Stat(filepath.Join(ws, "gen")); err != nil {
			t.Error(err)
		} else if uid := fi.Sys().(*syscall.Stat_t).Uid; int(uid) != owner {
			t.Errorf("gen, made for the run, is owned by uid %d, want the workspace owner %d", uid, owner)
		}
	})
}

// TestSecTmpdirBounded: a 2 GiB write to TMPDIR went into host memory
// (the session dir on /dev/shm). TMPDIR is the sandbox's own tmpfs of
// sandbox.limits.tmp_size: writing past it is ENOSPC.
func TestSecTmpdirBounded(t *testing.T) {
	forEachIsolating(t, func(t *testing.T, backend string) {
		cfg := "sandbox:\n  limits:\n    tmp_size: 8388608\n"
		script := `dd if=/dev/zero of="$TMPDIR/f" bs=65536 count=512 2>/dev/null; echo "dd $?"; wc -c < "$TMPDIR/f"; df -k "$TMPDIR" | tail -1`
		out := gb(t, backend, Run{Config: cfg, Command: []string{"sh", "-c", script}})
		lines := strings.Split(out.Stdout, "\n")
		if len(lines) < 2 || lines[0] == "dd 0" {
			t.Fatalf("writing 32 MiB into an 8 MiB TMPDIR: %q, stderr %q", out.Stdout, out.Stderr)
		}
		if n, _ := strconv.Atoi(strings.TrimSpace(lines[1])); n > 8<<20 || n == 0 {
			t.Errorf("wrote %d bytes", n)
		}
	})
}

// TestSecSessionPrivate: any local user read the output of read_file on a
// 0600 file through the session's responses. Now a third uid can neither
// list the session parent nor enter a session.
func TestSecSessionPrivate(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv")
	}
	forEachBackend(t, func(t *testing.T, backend string) {
		ws := workspace(t)
		secret := fmt.Sprintf("TOP-SECRET-%d", rand.IntN(1000000))
		must(t, os.WriteFile(filepath.Join(ws, "secret"), []byte(secret), 0o644))
		marker := fmt.Sprintf("1.%d", rand.IntN(1000000))
		cmd := exec.Command(binary, "run", "--sandbox", backend, "--", "sh", "-c",
			// A call made by hand is never acknowledged: its response stays
			// in the session while the command lives.
			`C=$GATEBRIDGE_CALLS_DIR; mkdir $C/k $C/k/args; printf read_file > $C/k/gate; printf secret > $C/k/args/0; : > $C/k/ready
while [ ! -f $GATEBRIDGE_RESPONSES_DIR/k.exit ]; do sleep 0.01; done; sleep `+marker)
		cmd.Dir = ws
		must(t, cmd.Start())
		defer cmd.Wait()
		if !sandboxtest.Poll(20*time.Second, func() bool { return len(sleepPids(marker)) > 0 }) {
			cmd.Process.Kill()
			t.Fatal("the command did not start")
		}
		parent := "/dev/shm/gatebridge-0"
		if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
			parent = filepath.Join(x, "gatebridge-0")
		}
		var session string
		ents, _ := os.ReadDir(parent)
		for _, e := range ents {
			m, _ := filepath.Glob(filepath.Join(parent, e.Name(), "responses", "*"))
			for _, f := range m {
				if b, _ := os.ReadFile(f); strings.Contains(string(b), secret) {
					session = filepath.Join(parent, e.Name())
				}
			}
		}
		if session == "" {
			t.Fatalf("no live session holding the response found under %s", parent)
		}
		probe := fmt.Sprintf(`ls %[1]s; ls %[2]s; ls %[2]s/responses; cat %[2]s/responses/*; cat %[2]s/responses/1.out; ls %[2]s/calls; echo x > %[2]s/calls/x; echo done`, parent, session)
		third := exec.Command("setpriv", "--reuid=12345", "--regid=12345", "--clear-groups", "sh", "-c", probe)
		b, _ := third.CombinedOutput()
		if strings.Contains(string(b), secret) || strings.Contains(string(b), filepath.Base(session)+"\n") || !strings.Contains(string(b), "done") {
			t.Errorf("uid 12345 sees the session: %s", b)
		}
		if _, err := os.Stat(filepath.Join(session, "calls", "x")); err == nil {
			t.Error("uid 12345 wrote into calls/")
		}
	})
}

// TestSecPersistentIsolated: every persistent sandbox mounted the same
// sessions root, and a command in sandbox A wrote a call into sandbox B's
// live session and read B's responses. Each sandbox now has its own root
// (the default), and A cannot reach B's session.
func TestSecPersistentIsolated(t *testing.T) {
	needBackend(t, "docker")
	wsA, wsB := workspace(t), workspace(t)
	secret := fmt.Sprintf("B-SECRET-%d", rand.IntN(1000000))
	must(t, os.WriteFile(filepath.Join(wsB, "secret"), []byte(secret), 0o644))
	a, b := randName("iso-a"), randName("iso-b")
	for _, s := range []struct{ name, ws string }{{a, wsA}, {b, wsB}} {
		if out := gbRaw(t, s.ws, nil, nil, 0, "sandbox", "start", s.name); out.Code != 0 {
			t.Fatalf("start %s: %s", s.name, out.Stderr)
		}
		t.Cleanup(func() { gbRaw(t, s.ws, nil, nil, 0, "sandbox", "stop", s.name) })
	}
	// B: a live session holding a response with the secret.
	marker := fmt.Sprintf("2.%d", rand.IntN(1000000))
	cmd := exec.Command(binary, "run", "--reuse", b, "--", "sh", "-c", "read_file secret >/dev/null; echo $GATEBRIDGE_SESSION_DIR; sleep "+marker)
	cmd.Dir = wsB
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	defer cmd.Wait()
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	go io.Copy(io.Discard, stdout)
	if !sandboxtest.Poll(20*time.Second, func() bool { return len(sleepPids(marker)) > 0 }) {
		cmd.Process.Kill()
		t.Fatal("B's command did not start")
	}
	bSession := strings.TrimSpace(line) // inside path, e.g. /gatebridge/sessions/gb-…
	if bSession == "" {
		t.Fatal("B did not print its session dir")
	}
	probe := fmt.Sprintf(`ls /gatebridge/sessions 2>/dev/null; cat %[1]s/responses/* 2>/dev/null; mkdir %[1]s/calls/evil 2>/dev/null && echo WROTE; ls -d %[1]s 2>/dev/null && echo SEEN; echo done`, bSession)
	out := gbRaw(t, wsA, nil, nil, 0, "run", "--reuse", a, "--", "sh", "-c", probe)
	if out.Stdout != "done\n" {
		t.Errorf("from A: stdout %q (want only done), stderr %q", out.Stdout, out.Stderr)
	}
}
