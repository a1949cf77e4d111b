package bwrap_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/internal/hint"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/bwrap"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

// newIsolator returns an isolator after checking that bwrap works here
// (skipped otherwise, failed where GATEBRIDGE_REQUIRE_BACKENDS names
// bwrap).
func newIsolator(t *testing.T, limits sandbox.Limits) *bwrap.Isolator {
	t.Helper()
	sandboxtest.RequireBackend(t, bwrap.New())
	iso := &bwrap.Isolator{Limits: limits}
	if err := iso.Check(context.Background()); err != nil {
		t.Fatalf("bwrap runs here but the isolator does not: %v", err)
	}
	return iso
}

// openDir is a fresh directory the isolated program's uid could read and
// write on the host (0777, and its parent 0755): only the isolation keeps
// it out.
func openDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	os.Chmod(d, 0o777)
	os.Chmod(filepath.Dir(d), 0o755)
	return d
}

type isoRun struct {
	ctx    context.Context
	c      bwrap.Confinement
	dir    string
	env    []string
	before func(cmd *exec.Cmd) // after Isolate, before Start
}

// run runs script with sh in iso under r and returns its output and
// cmd.Run's error, after cleanup.
func (r isoRun) run(t *testing.T, iso *bwrap.Isolator, script string) (stdout, stderr string, err error) {
	t.Helper()
	ctx := r.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script)
	cmd.Stdout, cmd.Stderr, cmd.Dir = &out, &errb, r.dir
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=/tmp"}, r.env...)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		cleanup, err := iso.Isolate(context.Background(), cmd, r.c)
		if err != nil {
			done <- fmt.Errorf("isolate: %w", err)
			return
		}
		if r.before != nil {
			r.before(cmd)
		}
		err = cmd.Run()
		cleanup()
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("isolated run hung")
	}
	return out.String(), errb.String(), err
}

// What every isolated program is: not root, no capabilities, no new
// privileges (a setuid binary gives nothing), in a session of its own (no
// terminal to push input into), in /tmp unless told, with only the
// environment it was given, and a root without the host's /root, /home or
// session directories.
func TestIsolateIdentity(t *testing.T) {
	iso := newIsolator(t, sandbox.Limits{})
	t.Setenv("GB_ISO_TEST_SECRET", "should-not-leak")
	out, stderr, err := isoRun{env: []string{"GIVEN=yes"}}.run(t, iso, `id -u; id -g; pwd; echo "given=$GIVEN secret=$GB_ISO_TEST_SECRET"
grep -E '^(CapEff|CapPrm|CapAmb|NoNewPrivs):' /proc/self/status | tr -s '\t' ' '
ls -A /; ls -A /root /home 2>&1 | head -2
echo x > /etc/gb-iso-x 2>/dev/null && echo wrote-etc; echo x > /usr/gb-iso-x 2>/dev/null && echo wrote-usr
[ "$(cut -d' ' -f6 /proc/self/stat)" != 0 ] && echo own-session # 0: a session outside the pid namespace
true`)
	if err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	want := os.Getuid()
	if want == 0 {
		want = bwrap.GateUID
	}
	lines := strings.Split(out, "\n")
	if lines[0] != strconv.Itoa(want) || lines[0] == "0" || lines[1] == "0" {
		t.Errorf("runs as %s:%s, want %d and never root:\n%s", lines[0], lines[1], want, out)
	}
	for _, w := range []string{"/tmp\n", "given=yes secret=\n", "own-session\n", "CapEff: 0000000000000000\n", "CapPrm: 0000000000000000\n", "NoNewPrivs: 1\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("missing %q in:\n%s", w, out)
		}
	}
	for _, bad := range []string{"wrote-etc", "wrote-usr", "should-not-leak"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s:\n%s", bad, out)
		}
	}
	if !strings.Contains(out, "'/root': No such file") || !strings.Contains(out, "'/home': No such file") {
		t.Errorf("/root or /home visible:\n%s", out)
	}
}

// The program writes only its Write paths: not a world-writable host
// directory it was not given, not a Read path, not its working directory
// (read-only unless in Write), not its own program file.
func TestIsolateWriteOutside(t *testing.T) {
	iso := newIsolator(t, sandbox.Limits{})
	notGiven, readOnly, writable, cwd := openDir(t), openDir(t), openDir(t), openDir(t)
	r := isoRun{c: bwrap.Confinement{Read: []string{readOnly}, Write: []string{writable}}, dir: cwd}
	out, stderr, err := r.run(t, iso, fmt.Sprintf(`for d in %s %s %s; do echo pwned > "$d/pwned" 2>/dev/null && echo "wrote $d"; done
echo pwned > ./pwned2 2>/dev/null && echo wrote-cwd; echo ok > %s/ok && echo wrote-writable; true`, notGiven, readOnly, cwd, writable))
	if err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	if out != "wrote-writable\n" {
		t.Errorf("stdout %q, want only wrote-writable", out)
	}
	for _, d := range []string{notGiven, readOnly, cwd} {
		for _, f := range []string{"pwned", "pwned2"} {
			if _, err := os.Stat(filepath.Join(d, f)); err == nil {
				t.Errorf("the program wrote %s on the host", filepath.Join(d, f))
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(writable, "ok")); err != nil || string(b) != "ok\n" {
		t.Errorf("the Write path did not get the file: %q %v", b, err)
	}
	// A working directory inside a Write path is writable.
	r = isoRun{c: bwrap.Confinement{Write: []string{writable}}, dir: writable}
	if out, stderr, err := r.run(t, iso, `echo here > ./here && cat here`); err != nil || out != "here\n" {
		t.Errorf("cwd in Write: %q %q %v", out, stderr, err)
	}
}

// The program reads only its Read and Write paths (and the system): not
// a world-readable host file it was not given, not a directory beside a
// Read path.
func TestIsolateReadOutside(t *testing.T) {
	iso := newIsolator(t, sandbox.Limits{})
	secretDir, given := openDir(t), openDir(t)
	secret := filepath.Join(secretDir, "secret.txt")
	os.WriteFile(secret, []byte("HOST-SECRET\n"), 0o644)
	os.WriteFile(filepath.Join(given, "f.txt"), []byte("given\n"), 0o644)
	r := isoRun{c: bwrap.Confinement{Read: []string{given}}}
	out, _, _ := r.run(t, iso, fmt.Sprintf(`cat %s; ls %s; cat %s/f.txt`, secret, secretDir, given))
	if strings.Contains(out, "HOST-SECRET") || strings.Contains(out, "secret.txt") {
		t.Errorf("read outside Read: %q", out)
	}
	if !strings.Contains(out, "given\n") {
		t.Errorf("the Read path is not readable: %q", out)
	}
	// The working directory listed in Read too (one mount, not two of
	// one descriptor, which bwrap consumes).
	r2 := isoRun{c: bwrap.Confinement{Read: []string{given, given}, Write: []string{secretDir}}, dir: given}
	if out, stderr, err := r2.run(t, iso, "cat f.txt"); err != nil || out != "given\n" {
		t.Errorf("dir also in Read: %q %q %v", out, stderr, err)
	}
	// Control: the same uid reads it when it is listed.
	r.c.Read = append(r.c.Read, secretDir)
	if out, stderr, err := r.run(t, iso, "cat "+secret); err != nil || out != "HOST-SECRET\n" {
		t.Errorf("control: listed, the file is not readable: %q %q %v", out, stderr, err)
	}
}

// A Read path swapped for a symlink to another host directory after
// Isolate, before bwrap mounts it (another sandbox writing the same
// workspace can do that): the program sees what Isolate checked and
// opened, not the link's target.
func TestIsolateReadPathSwapped(t *testing.T) {
	iso := newIsolator(t, sandbox.Limits{})
	base, secretDir := openDir(t), openDir(t)
	os.WriteFile(filepath.Join(secretDir, "secret.txt"), []byte("HOST-SECRET\n"), 0o644)
	docs := filepath.Join(base, "docs")
	os.Mkdir(docs, 0o755)
	os.WriteFile(filepath.Join(docs, "readme"), []byte("docs\n"), 0o644)
	r := isoRun{c: bwrap.Confinement{Read: []string{docs}}, before: func(*exec.Cmd) {
		must(t, os.Rename(docs, filepath.Join(base, "old")))
		must(t, os.Symlink(secretDir, docs))
	}}
	out, stderr, _ := r.run(t, iso, "cat "+docs+"/* 2>&1")
	if strings.Contains(out, "HOST-SECRET") {
		t.Errorf("the swapped link's target was mounted: %q %q", out, stderr)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// No network unless Network: a listener of this test on 127.0.0.1 is out
// of reach (the program has a loopback of its own); with Network it is
// reached.
func TestIsolateNetwork(t *testing.T) {
	iso := newIsolator(t, sandbox.Limits{})
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash for /dev/tcp")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer ln.Close()
	got := make(chan string, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, _ := io.ReadAll(io.LimitReader(c, 64))
			c.Close()
			got <- string(b)
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	script := fmt.Sprintf(`bash -c 'echo hello >/dev/tcp/127.0.0.1/%d' 2>/dev/null && echo connected || echo refused`, port)
	out, stderr, err := isoRun{}.run(t, iso, script)
	if err != nil || out != "refused\n" {
		t.Errorf("without network: %q %q %v", out, stderr, err)
	}
	select {
	case s := <-got:
		t.Errorf("the listener got %q from an isolated program without network", s)
	case <-time.After(100 * time.Millisecond):
	}
	out, stderr, err = isoRun{c: bwrap.Confinement{Network: true}}.run(t, iso, script)
	if err != nil || out != "connected\n" {
		t.Errorf("with network: %q %q %v", out, stderr, err)
	}
	select {
	case s := <-got:
		if s != "hello\n" {
			t.Errorf("listener got %q", s)
		}
	case <-time.After(5 * time.Second):
		t.Error("with network: the listener got nothing")
	}
}

// Nothing the program starts outlives the run: a background child, one
// in a new session (setsid), after a normal return, a timeout (the
// context kills bwrap) and a cancellation. Checked right after cleanup,
// without waiting.
func TestIsolateNoLeftovers(t *testing.T) {
	iso := newIsolator(t, sandbox.Limits{})
	for _, tc := range []struct {
		name   string
		fg     bool // the program itself waits
		cancel bool
	}{{"return", false, false}, {"timeout", true, false}, {"cancel", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			marker := fmt.Sprintf("%d.%d", 900+rand.IntN(99), rand.IntN(1000000))
			t.Cleanup(func() { sandboxtest.KillMarked(marker) })
			script := fmt.Sprintf("sleep %s & setsid sleep %s & echo started", marker, marker)
			if tc.fg {
				script += "; sleep " + marker
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if tc.name == "timeout" {
				ctx, cancel = context.WithTimeout(context.Background(), 1500*time.Millisecond)
				defer cancel()
			}
			if tc.cancel {
				go func() {
					for len(sandboxtest.HostProcesses(marker)) < 3 {
						time.Sleep(10 * time.Millisecond)
					}
					cancel()
				}()
			}
			start := time.Now()
			out, stderr, err := isoRun{ctx: ctx}.run(t, iso, script)
			if out != "started\n" {
				t.Fatalf("stdout %q stderr %q err %v", out, stderr, err)
			}
			if tc.fg && (err == nil || time.Since(start) > 20*time.Second) {
				t.Errorf("the program was not stopped: %v after %v", err, time.Since(start))
			}
			if left := sandboxtest.HostProcesses(marker); len(left) > 0 {
				t.Errorf("still running after the run: %v", left)
			}
		})
	}
}

// A key in the session keyring of the thread that isolates (the
// invoker's) cannot be read by the program: it gets a keyring of its own.
// Before, an unprivileged program in a user namespace read root's key by
// its serial (keyctl read), though /proc/keys hid it.
func TestIsolateKeyring(t *testing.T) {
	iso := newIsolator(t, sandbox.Limits{})
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 to call keyctl")
	}
	done := make(chan string, 1)
	go func() {
		runtime.LockOSThread() // the key and Isolate on one thread, discarded after
		id, err := unix.AddKey("user", fmt.Sprintf("gb-iso-key-%d", rand.IntN(1000000)), []byte("KEY-SECRET"), unix.KEY_SPEC_SESSION_KEYRING)
		if err != nil {
			done <- "skip: " + err.Error()
			return
		}
		defer unix.KeyctlInt(unix.KEYCTL_REVOKE, id, 0, 0, 0)
		script := fmt.Sprintf(`python3 -c '
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(64)
n = libc.syscall(250, 11, %d, buf, 64)
print("read", n, buf.raw[:max(n, 0)].decode())
'`, id)
		var out bytes.Buffer
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cleanup, err := iso.Isolate(context.Background(), cmd, bwrap.Confinement{})
		if err != nil {
			done <- "isolate: " + err.Error()
			return
		}
		cmd.Run()
		cleanup()
		done <- out.String()
	}()
	out := <-done
	if s, ok := strings.CutPrefix(out, "skip: "); ok {
		t.Skipf("cannot add a key here: %s", s)
	}
	if strings.Contains(out, "KEY-SECRET") || !strings.Contains(out, "read -1") {
		t.Errorf("the invoker's key is readable inside: %q", out)
	}
}

// Limits bound the program as they bound sandboxed commands: with a pids
// limit, a program that forks 60 sleepers gets at most that many.
func TestIsolateLimits(t *testing.T) {
	if mech, missing := bwrap.LimitsMechanism(); mech == "none" {
		if os.Geteuid() == 0 && strings.Contains(os.Getenv("GATEBRIDGE_REQUIRE_BACKENDS"), "bwrap") {
			t.Fatalf("bwrap required but its limits are not enforced here: %s", missing)
		}
		t.Skipf("no limits here: %s", missing)
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 to count forks")
	}
	iso := newIsolator(t, sandbox.Limits{Pids: 20, Memory: 64 << 20})
	out, stderr, _ := isoRun{}.run(t, iso, `python3 -c '
import os, time
n = 0
for i in range(60):
    try:
        pid = os.fork()
    except OSError:
        continue
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    n += 1
print(n)
'`)
	n, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil || n >= 20 || n == 0 {
		t.Errorf("%q forks (stderr %q): want some, fewer than the pids limit 20", out, stderr)
	}
}

// Isolate fails closed: a missing Read path, a relative one, a missing
// bwrap. cmd is left unrunnable as it was given.
func TestIsolateRefuses(t *testing.T) {
	iso := newIsolator(t, sandbox.Limits{})
	for _, tc := range []struct {
		name string
		iso  *bwrap.Isolator
		c    bwrap.Confinement
		want string
	}{
		{"missing read", iso, bwrap.Confinement{Read: []string{"/nonexistent/gb"}}, "read path"},
		{"relative write", iso, bwrap.Confinement{Write: []string{"rel"}}, "not an absolute path"},
		{"no bwrap", &bwrap.Isolator{Path: "/nonexistent/bwrap"}, bwrap.Confinement{}, "bwrap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := isoRun{c: tc.c}.run(t, tc.iso, "true")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
	if os.Geteuid() == 0 {
		// A root-owned 0700 directory is out of the gate uid's reach: said
		// plainly, with the path at fault, before bwrap runs.
		private := t.TempDir() // 0700, root's
		_, _, err := isoRun{c: bwrap.Confinement{Read: []string{private}}}.run(t, iso, "true")
		if err == nil || !strings.Contains(err.Error(), "out of the program's reach") || !strings.Contains(err.Error(), "uid "+strconv.Itoa(bwrap.GateUID)) || hint.Of(err) == "" {
			t.Errorf("unreachable read path: %v", err)
		}
	}
	if err := (&bwrap.Isolator{Path: "/nonexistent/bwrap"}).Check(context.Background()); err == nil {
		t.Error("Check passed without bwrap")
	} else if !errors.Is(err, sandbox.ErrUnavailable) || hint.Of(err) == "" {
		t.Errorf("Check: %v: want unavailable, with a hint", err)
	}
}

// As root, an isolated program runs as a uid of its own (bwrap.GateUID),
// not as nobody, the sandboxed commands' uid (and many daemons'): a host
// process of that uid cannot read the program's environment, where its
// secrets are, from /proc (nor ptrace it). Before, both ran as 65534 and
// it could. The uid has a name inside (ssh refuses a uid without one).
func TestIsolateApartFromNobody(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: not root, a gate runs as gatebridge's own uid")
	}
	iso := newIsolator(t, sandbox.Limits{})
	cmd := exec.Command("/bin/sh", "-c", `id -un; id -gn; echo started; exec sleep 30`)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "GATE_TOKEN=gb-isolate-secret-0123456789"}
	outR, outW, err := os.Pipe()
	must(t, err)
	defer outR.Close()
	cmd.Stdout = outW
	started := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		cleanup, err := iso.Isolate(context.Background(), cmd, bwrap.Confinement{})
		if err != nil {
			started <- err
			return
		}
		err = cmd.Start()
		outW.Close()
		started <- err
		if err == nil {
			cmd.Wait()
		}
		cleanup()
	}()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); <-done }()
	var head bytes.Buffer
	buf := make([]byte, 256)
	for !strings.Contains(head.String(), "started\n") {
		n, err := outR.Read(buf)
		if err != nil {
			t.Fatalf("the program did not start: %v (%q)", err, head.String())
		}
		head.Write(buf[:n])
	}
	if want := bwrap.GateUser + "\n" + bwrap.GateUser + "\nstarted\n"; head.String() != want {
		t.Errorf("names inside: %q, want %q", head.String(), want)
	}
	// bwrap, its child (the namespace's init) and the program: every
	// process of the sandbox, as the host sees them.
	pids := []int{cmd.Process.Pid}
	for k := 0; k < len(pids) && len(pids) < 8; k++ {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pids[k], pids[k]))
		for _, f := range strings.Fields(string(b)) {
			p, _ := strconv.Atoi(f)
			pids = append(pids, p)
		}
	}
	if len(pids) < 3 {
		t.Fatalf("found only %v of the sandbox's processes", pids)
	}
	for _, p := range pids {
		probe := exec.Command("/bin/cat", fmt.Sprintf("/proc/%d/environ", p))
		probe.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: bwrap.NobodyUID, Gid: bwrap.NobodyUID, Groups: []uint32{}}}
		out, err := probe.Output()
		if err == nil || bytes.Contains(out, []byte("gb-isolate-secret")) {
			t.Errorf("uid %d read the environment of pid %d: %q (%v)", bwrap.NobodyUID, p, out, err)
		}
	}
}

// A Write path (or Read path, or working directory) that leads through a
// link is refused, not followed: the caller resolved it when it checked
// it, so a link there now was planted since (the sandbox writes the
// workspace: it swaps the build directory a gate writes for a link to
// $HOME). Before, the link's target was mounted read-write and the
// program wrote the host file.
func TestIsolateLinkedPathRefused(t *testing.T) {
	iso := newIsolator(t, sandbox.Limits{})
	base, target := openDir(t), openDir(t)
	link := filepath.Join(base, "build")
	must(t, os.Symlink(target, link))
	for _, r := range []isoRun{
		{c: bwrap.Confinement{Write: []string{link}}},
		{c: bwrap.Confinement{Write: []string{target}}, dir: link},
		{c: bwrap.Confinement{Read: []string{link}, Write: []string{base}}},
	} {
		_, _, err := r.run(t, iso, "echo pwned > "+target+"/planted")
		if err == nil || !strings.Contains(err.Error(), "leads through a link") {
			t.Errorf("%+v: err %v, want a refusal", r.c, err)
		}
		if _, err := os.Stat(filepath.Join(target, "planted")); err == nil {
			t.Errorf("%+v: the program wrote through the link", r.c)
			os.Remove(filepath.Join(target, "planted"))
		}
	}
}
