package bwrap_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/bwrap"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

func newBwrap(t *testing.T) *bwrap.Backend {
	t.Helper()
	b := bwrap.New()
	sandboxtest.RequireBackend(t, b)
	return b
}

func TestBwrapConformance(t *testing.T) {
	newBwrap(t)
	sandboxtest.Run(t, func(t *testing.T) sandbox.Backend { return newBwrap(t) }, sandboxtest.Options{Isolated: true})
}

// asNobody returns a bwrap backend whose bwrap runs unprivileged (as
// 65534 when the tests run as root).
func asNobody(t *testing.T) *bwrap.Backend {
	t.Helper()
	// Not root, bwrap runs as the invoker; as root, the backend itself
	// starts bwrap as Spec.UID (0 → 65534, nobody). Either way it is
	// unprivileged and relies on a user namespace.
	return newBwrap(t)
}

// The whole suite again with bwrap unprivileged: it then relies on a user
// namespace, as it does for every non-root user.
func TestBwrapConformanceAsNobody(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	asNobody(t)
	sandboxtest.Run(t, func(t *testing.T) sandbox.Backend { return asNobody(t) }, sandboxtest.Options{Isolated: true})
}

func TestBwrapUnprivilegedIdentity(t *testing.T) {
	b := asNobody(t)
	f := sandboxtest.NewFixture(t, sandboxtest.Options{})
	res, err := b.Run(context.Background(), f.Spec("id -u; cat /proc/self/uid_map"))
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || !strings.HasPrefix(string(res.Stdout), "65534\n") {
		t.Errorf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}

// Writes to bin/ and responses/ fail because the mount is read-only, not
// because of permissions (the suite makes them 0777).
func TestBwrapReadOnlyIsEROFS(t *testing.T) {
	b := newBwrap(t)
	f := sandboxtest.NewFixture(t, sandboxtest.Options{})
	res, err := b.Run(context.Background(), f.Spec(`true > "$GATEBRIDGE_RESPONSES_DIR/x"; true > "${PATH%%:*}/x"; true > ws-x; true > "$GATEBRIDGE_SESSION_DIR/x"; exit 0`))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(res.Stderr), "Read-only file system"); n != 4 {
		t.Errorf("want 4 EROFS errors, stderr:\n%s", res.Stderr)
	}
}

func TestBwrapInsidePathsAreHostPaths(t *testing.T) {
	b := newBwrap(t)
	f := sandboxtest.NewFixture(t, sandboxtest.Options{})
	res, err := b.Run(context.Background(), f.Spec(`printf '%s\n' "$PWD" "$GATEBRIDGE_CALLS_DIR" "$GATEBRIDGE_RESPONSES_DIR" "$GATEBRIDGE_SESSION_DIR" "$TMPDIR" "${PATH%%:*}" "$HOME"`))
	if err != nil {
		t.Fatal(err)
	}
	eval := func(p string) string {
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	want := strings.Join([]string{eval(f.Workspace), eval(f.Session.Calls), eval(f.Session.Responses),
		eval(f.Session.Root), "/tmp", eval(f.Session.Bin), "/tmp"}, "\n") + "\n" // TMPDIR: the sandbox's own /tmp
	if string(res.Stdout) != want {
		t.Errorf("stdout\n%s\nwant\n%s", res.Stdout, want)
	}
}

// Nothing outlives Run, even a process that started its own session: the
// pid namespace dies with the command.
func TestBwrapSetsidDoesNotEscape(t *testing.T) {
	b := newBwrap(t)
	f := sandboxtest.NewFixture(t, sandboxtest.Options{})
	m := sandboxtest.Marker()
	t.Cleanup(func() { sandboxtest.KillMarked(m) })
	res, err := b.Run(context.Background(), f.Spec("setsid sleep "+m+" & sleep 0.2; echo done"))
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || string(res.Stdout) != "done\n" {
		t.Errorf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	sandboxtest.HostNoLeftovers(t, m)
}

func TestBwrapHostnameAndNoSecretsInEtc(t *testing.T) {
	b := newBwrap(t)
	f := sandboxtest.NewFixture(t, sandboxtest.Options{})
	res, err := b.Run(context.Background(), f.Spec("cat /proc/sys/kernel/hostname; [ -e /etc/shadow ] && echo shadow; [ -e /root ] && echo root; [ -e /var ] && echo var; [ -e /sys/class ] && echo sys; [ -e /run ] && echo run; exit 0"))
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "gatebridge\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
}

func TestBwrapCommandNotFound(t *testing.T) {
	b := newBwrap(t)
	f := sandboxtest.NewFixture(t, sandboxtest.Options{})
	spec := f.Spec("")
	spec.Command = []string{"gatebridge-no-such-command"}
	res, err := b.Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != sandbox.ExitNotFound {
		t.Errorf("exit %d stderr %q", res.ExitCode, res.Stderr)
	}
}

// A sandbox bwrap cannot set up is an *Error with bwrap's message and a
// hint, not exit status 1.
func TestBwrapSetupFailure(t *testing.T) {
	b := newBwrap(t)
	b.ReadOnly = []string{"/gatebridge-no-such-dir"}
	f := sandboxtest.NewFixture(t, sandboxtest.Options{})
	res, err := b.Run(context.Background(), f.Spec("exit 0"))
	var se *sandbox.Error
	if !errors.As(err, &se) || !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("Run = %+v, %v; want *sandbox.Error", res, err)
	}
	if !strings.Contains(se.Error(), "gatebridge-no-such-dir") || se.Help == "" {
		t.Errorf("error %q hint %q", se.Error(), se.Help)
	}
	// A command that exits 1 by itself is not a setup failure.
	b.ReadOnly = nil
	res, err = b.Run(context.Background(), f.Spec("echo 'bwrap: fake' >&2; exit 1"))
	if err != nil || res.ExitCode != 1 {
		t.Errorf("Run = %+v, %v", res, err)
	}
}

func TestBwrapMissingBinary(t *testing.T) {
	b := &bwrap.Backend{Path: "/nonexistent/bwrap"}
	err := b.Check(context.Background())
	var se *sandbox.Error
	if !errors.As(err, &se) || !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(se.Help, "bubblewrap") {
		t.Fatalf("Check = %v", err)
	}
	if _, err := b.Run(context.Background(), &sandbox.Spec{Command: []string{"true"}}); !errors.As(err, &se) {
		t.Fatalf("Run = %v", err)
	}
}

// The session may live under /tmp, which is a fresh tmpfs inside: the
// session binds must come after it.
func TestBwrapSessionUnderTmp(t *testing.T) {
	b := newBwrap(t)
	dir, err := os.MkdirTemp("/tmp", "gb-session-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := sandbox.SessionDirs{Root: dir, Bin: dir + "/bin", Calls: dir + "/calls", Responses: dir + "/responses", Tmp: dir + "/tmp"}
	for _, d := range []string{s.Bin, s.Calls, s.Responses, s.Tmp} {
		os.Mkdir(d, 0o777)
	}
	res, err := b.Run(context.Background(), &sandbox.Spec{
		Command:    []string{"sh", "-c", `printf hi > "$GATEBRIDGE_CALLS_DIR/f"; ls /tmp`},
		Session:    s,
		SessionEnv: sandboxtest.SessionEnv,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(s.Calls + "/f"); string(got) != "hi" || res.ExitCode != 0 {
		t.Errorf("exit %d calls/f %q stderr %q", res.ExitCode, got, res.Stderr)
	}
	// Only the path to the session shows in /tmp, not the host's /tmp.
	if got := strings.Fields(string(res.Stdout)); len(got) != 1 || got[0] != filepath.Base(dir) {
		t.Errorf("/tmp inside holds %q", got)
	}
}

// Large output through bwrap's pipes is complete and ordered.
func TestBwrapLargeOutput(t *testing.T) {
	b := newBwrap(t)
	f := sandboxtest.NewFixture(t, sandboxtest.Options{})
	spec := f.Spec("seq 1 200000")
	spec.MaxOutput = 8 << 20
	res, err := b.Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := exec.Command("seq", "1", "200000").Output()
	if !bytes.Equal(res.Stdout, want) {
		t.Errorf("stdout differs: %d bytes, want %d", len(res.Stdout), len(want))
	}
}

// /proc/sys is read-only inside: as root (uid 0 mapped to the host's root)
// its 0644 files would otherwise set host-wide sysctls such as
// kernel.core_pattern without any capability.
func TestBwrapProcSysReadOnly(t *testing.T) {
	for name, b := range map[string]*bwrap.Backend{"self": newBwrap(t), "nobody": asNobody(t)} {
		t.Run(name, func(t *testing.T) {
			f := sandboxtest.NewFixture(t, sandboxtest.Options{})
			res, err := b.Run(context.Background(), f.Spec(`v=$(cat /proc/sys/kernel/core_pattern) && printf '%s\n' "$v" > /proc/sys/kernel/core_pattern && echo written; cat /proc/sys/kernel/hostname`))
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Stdout) != "gatebridge\n" {
				t.Errorf("stdout %q (want only the hostname), stderr %q", res.Stdout, res.Stderr)
			}
		})
	}
}

// As root, a Spec whose gid is 0 (a library caller's 4321:0, say) is
// refused without AllowRoot: in root's group the command could leave a
// setgid-root copy of sh in a writable workspace. With AllowRoot the
// command runs in group 0 as asked.
func TestBwrapRefusesGroupRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the identity is only chosen when gatebridge is root")
	}
	b := newBwrap(t)
	f := sandboxtest.NewFixture(t, sandboxtest.Options{})
	spec := f.Spec("id -u; id -g")
	spec.UID, spec.GID = 4321, 0
	res, err := b.Run(context.Background(), spec)
	if err == nil || !strings.Contains(err.Error(), "gid 0") {
		t.Fatalf("4321:0 without allow_root: err %v, result %+v", err, res)
	}
	spec = f.Spec("id -u; id -g")
	spec.UID, spec.GID, spec.AllowRoot = 4321, 0, true
	res, err = b.Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "4321\n0\n" {
		t.Errorf("with allow_root: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
}

func TestBwrapTTY(t *testing.T) {
	newBwrap(t)
	sandboxtest.RunTTY(t, func(t *testing.T) sandbox.Backend { return newBwrap(t) }, sandboxtest.Options{Isolated: true})
}
