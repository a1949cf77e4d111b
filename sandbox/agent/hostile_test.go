//go:build linux

package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/agent"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

// fake plays a hostile sandbox: it writes out/ by hand, as any command in
// the sandbox could.
type fake struct {
	t      *testing.T
	dir    string
	out    string
	secret string
}

const secretText = "host-secret-7f3a"

func newFake(t *testing.T) *fake {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "agent")
	if err := agent.Prepare(dir, -1, -1); err != nil {
		t.Fatal(err)
	}
	f := &fake{t: t, dir: dir, out: filepath.Join(dir, agent.DirOut), secret: filepath.Join(root, "secret")}
	if err := os.WriteFile(f.secret, []byte(secretText), 0o600); err != nil {
		t.Fatal(err)
	}
	f.hello()
	return f
}

func (f *fake) hello() {
	b, _ := json.Marshal(agent.Hello{Protocol: agent.Protocol, PID: 1, Path: "/bin"})
	if err := os.WriteFile(filepath.Join(f.out, agent.FileHello), b, 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fake) dial(opts agent.DialOptions) *agent.Conn {
	f.t.Helper()
	c, err := agent.Dial(context.Background(), f.dir, opts)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { c.Close() })
	return c
}

// request waits for the next request id in req/ (not in seen).
func (f *fake) request(seen map[string]bool) string {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ents, _ := os.ReadDir(filepath.Join(f.dir, agent.DirReq))
		for _, e := range ents {
			if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && !strings.HasPrefix(id, ".") && !seen[id] {
				seen[id] = true
				return id
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	f.t.Fatal("no request came")
	return ""
}

// write writes out/name as the agent does: whole, renamed into place.
func (f *fake) write(name, data string) {
	f.t.Helper()
	if err := writeWhole(filepath.Join(f.out, name), []byte(data)); err != nil {
		f.t.Fatal(err)
	}
}

func writeWhole(p string, data []byte) error {
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

type result struct {
	res *sandbox.Result
	err error
}

func (f *fake) start(c *agent.Conn, spec *sandbox.Spec) <-chan result {
	ch := make(chan result, 1)
	go func() {
		res, err := c.Run(context.Background(), agent.Command{Argv: []string{"true"}, Dir: "/"}, spec)
		ch <- result{res, err}
	}()
	return ch
}

func wait(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return: the host is stuck on what the sandbox wrote")
		return result{}
	}
}

// TestHostileOutputFiles: what the sandbox puts in place of a command's
// output is never followed, never blocks the host, and never reads a
// host file into the result.
func TestHostileOutputFiles(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(f *fake, path string) error
		want  string
	}{
		{"symlink to a host file", func(f *fake, p string) error { return os.Symlink(f.secret, p) }, "symbolic link (refused)"},
		{"hard link to a host file", func(f *fake, p string) error { return os.Link(f.secret, p) }, "more than one hard link (refused)"},
		{"FIFO", func(f *fake, p string) error { return syscall.Mkfifo(p, 0o666) }, "not a regular file (refused)"},
		{"directory", func(f *fake, p string) error { return os.Mkdir(p, 0o755) }, "not a regular file (refused)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			c := f.dial(agent.DialOptions{})
			ch := f.start(c, &sandbox.Spec{})
			id := f.request(map[string]bool{})
			if err := tc.plant(f, filepath.Join(f.out, id+".stdout")); err != nil {
				t.Fatal(err)
			}
			f.write(id+".exit", "0\n")
			r := wait(t, ch)
			if r.err != nil {
				t.Fatalf("Run: %v", r.err)
			}
			if strings.Contains(string(r.res.Stdout)+string(r.res.Stderr), secretText) {
				t.Fatalf("the host file's content reached the result: %q", r.res.Stdout)
			}
			if !strings.Contains(string(r.res.Stderr), tc.want) {
				t.Errorf("stderr %q, want it to say %q", r.res.Stderr, tc.want)
			}
		})
	}
}

// TestHostileExitFiles: a garbled, oversized or linked exit status is an
// error for that command alone; a command running beside it gets its own
// result.
func TestHostileExitFiles(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(f *fake, path string) error
		want  string
	}{
		{"garbage", func(f *fake, p string) error { return writeWhole(p, []byte("abc")) }, "is not an exit status"},
		{"out of range", func(f *fake, p string) error { return writeWhole(p, []byte("256")) }, "is not an exit status"},
		{"negative", func(f *fake, p string) error { return writeWhole(p, []byte("-1")) }, "is not an exit status"},
		{"huge", func(f *fake, p string) error { return writeWhole(p, make([]byte, 1<<20)) }, "exceeds the size limit"},
		{"symlink", func(f *fake, p string) error { return os.Symlink(f.secret, p) }, "symbolic link (refused)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			c := f.dial(agent.DialOptions{})
			seen := map[string]bool{}
			bad := f.start(c, &sandbox.Spec{})
			badID := f.request(seen)
			good := f.start(c, &sandbox.Spec{})
			goodID := f.request(seen)
			if err := tc.plant(f, filepath.Join(f.out, badID+".exit")); err != nil {
				t.Fatal(err)
			}
			f.write(goodID+".stdout", "fine\n")
			f.write(goodID+".exit", "42\n")
			g := wait(t, good)
			if g.err != nil || g.res.ExitCode != 42 || string(g.res.Stdout) != "fine\n" {
				t.Errorf("the other command: err %v, result %+v", g.err, g.res)
			}
			b := wait(t, bad)
			if b.err == nil || !strings.Contains(b.err.Error(), tc.want) {
				t.Fatalf("Run: %v, %+v; want an error saying %q", b.err, b.res, tc.want)
			}
			if strings.Contains(b.err.Error(), secretText) {
				t.Fatalf("the error shows the host file: %v", b.err)
			}
		})
	}
}

// TestSparseOutputBounded: a sparse file claims terabytes at no cost to
// the sandbox; the host reads at most MaxStream bytes of it, stops the
// command, and says why.
func TestSparseOutputBounded(t *testing.T) {
	f := newFake(t)
	const max = 1 << 20
	c := f.dial(agent.DialOptions{MaxStream: max})
	var live countWriter
	ch := f.start(c, &sandbox.Spec{Stdout: &live})
	id := f.request(map[string]bool{})
	p := filepath.Join(f.out, id+".stdout")
	f.write(id+".stdout", "")
	if err := os.Truncate(p, 1<<40); err != nil {
		t.Fatal(err)
	}
	// The host asks the command to stop: the fake obeys once it sees a
	// signal file, as the agent would.
	sig := filepath.Join(f.dir, agent.DirReq, id+".sig.1")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(sig); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the host did not stop the command")
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.write(id+".exit", "143\n")
	r := wait(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if live.n > max {
		t.Errorf("the host read %d bytes, cap %d", live.n, max)
	}
	if !strings.Contains(string(r.res.Stderr), "exceeded") {
		t.Errorf("stderr %q does not say the output was cut", r.res.Stderr)
	}
}

type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// TestHostileHello: the hello is read like any out/ file, and a stale one
// means no agent.
func TestHostileHello(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(f *fake, p string) error
		want  string
	}{
		{"symlink", func(f *fake, p string) error { os.Remove(p); return os.Symlink(f.secret, p) }, "symbolic link"},
		{"huge", func(f *fake, p string) error { return writeWhole(p, make([]byte, 1<<20)) }, "exceeds the size limit"},
		{"FIFO", func(f *fake, p string) error { os.Remove(p); return syscall.Mkfifo(p, 0o666) }, "not a regular file"},
		{"stale", func(f *fake, p string) error {
			old := time.Now().Add(-time.Hour)
			return os.Chtimes(p, old, old)
		}, "not running"},
		{"other protocol", func(f *fake, p string) error { return writeWhole(p, []byte(`{"protocol":99}`)) }, "protocol 99"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			if err := tc.plant(f, filepath.Join(f.out, agent.FileHello)); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err := agent.Dial(context.Background(), f.dir, agent.DialOptions{Wait: 300 * time.Millisecond})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Dial: %v, want an error saying %q", err, tc.want)
			}
			if time.Since(start) > 5*time.Second {
				t.Errorf("Dial took %v", time.Since(start))
			}
		})
	}
}

// TestAgentGone: an agent that stops touching its hello fails the command
// after StaleAfter, instead of a wait without end.
func TestAgentGone(t *testing.T) {
	old := agent.StaleAfter
	agent.StaleAfter = time.Second
	t.Cleanup(func() { agent.StaleAfter = old })
	f := newFake(t)
	c := f.dial(agent.DialOptions{})
	ch := f.start(c, &sandbox.Spec{})
	f.request(map[string]bool{})
	r := wait(t, ch)
	if r.err == nil || !strings.Contains(r.err.Error(), "has not answered") {
		t.Fatalf("Run: %v, %+v; want the agent reported gone", r.err, r.res)
	}
}

// TestLeaseKillsOrphans: when the host goes away mid-command (its end of
// the lease closes), the agent kills the command's process group.
func TestLeaseKillsOrphans(t *testing.T) {
	t.Run("go", func(t *testing.T) {
		c, _ := startAgent(t)
		leaseKills(t, c)
	})
	t.Run("sh", func(t *testing.T) {
		c, _ := startShAgent(t, "/bin/sh")
		leaseKills(t, c)
	})
}

func leaseKills(t *testing.T, c *agent.Conn) {
	m := sandboxtest.Marker()
	done := make(chan error, 1)
	ctx := context.Background()
	go func() {
		_, err := c.Run(ctx, agent.Command{Argv: []string{"/bin/sh", "-c", "sleep " + m + " & sleep " + m}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/"}, &sandbox.Spec{})
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(sandboxtest.HostProcesses(m)) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.Close() // as if gatebridge died: the lease's write end closes
	if err := <-done; err == nil {
		t.Error("Run returned no error for a closed connection")
	}
	deadline = time.Now().Add(10 * time.Second)
	for len(sandboxtest.HostProcesses(m)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("processes outlived their host: %v", sandboxtest.HostProcesses(m))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAttachedRefusesRoot: an agent running as root runs every command as
// root; the attached backend refuses that unless allowed.
func TestAttachedRefusesRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the agent runs as the test's user")
	}
	c, _ := startAgent(t)
	f := sandboxtest.NewFixture(t, sandboxtest.Options{})
	spec := f.Spec("true")
	spec.WorkspaceWritable = true
	_, err := (&agent.Attached{Conn: c, Root: "/"}).Run(context.Background(), spec)
	var se *sandbox.Error
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "runs as root") {
		t.Fatalf("Run: %v, want a refusal", err)
	}
	if se.Help == "" {
		t.Error("no hint")
	}
}

// TestAttachedRefusesWhatItCannotEnforce: an attached sandbox's mounts are
// the pod's; the backend refuses a read-only workspace it cannot make
// read-only, a writable one the pod declared read-only, and a session
// outside the shared directory (the sandbox would not see it).
func TestAttachedRefusesWhatItCannotEnforce(t *testing.T) {
	c, _ := startAgent(t)
	f := sandboxtest.NewFixture(t, sandboxtest.Options{})
	run := func(a *agent.Attached, writable bool) error {
		spec := f.Spec("true")
		spec.WorkspaceWritable = writable
		spec.AllowRoot = true // the test's agent runs as the test's user
		res, err := a.Run(context.Background(), spec)
		if err == nil && res.ExitCode != 0 {
			t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
		}
		return err
	}
	rw := &agent.Attached{Conn: c, Root: "/"}
	ro := &agent.Attached{Conn: c, Root: "/", WorkspaceReadOnly: true}
	if err := run(rw, false); err == nil || !strings.Contains(err.Error(), "cannot make it read-only") {
		t.Errorf("read-only spec on a writable mount: %v", err)
	}
	if err := run(ro, true); err == nil || !strings.Contains(err.Error(), "mounts the workspace read-only") {
		t.Errorf("writable spec on a read-only mount: %v", err)
	}
	if err := run(rw, true); err != nil {
		t.Errorf("writable on writable: %v", err)
	}
	if err := run(ro, false); err != nil {
		t.Errorf("read-only on read-only: %v", err)
	}
	elsewhere := &agent.Attached{Conn: c, Root: t.TempDir()}
	if err := run(elsewhere, true); err == nil || !strings.Contains(err.Error(), "not under the shared directory") {
		t.Errorf("session outside the shared directory: %v", err)
	}
}

// TestAttachedProtectedPaths: the review's attack. With a writable
// workspace the sandbox appended to .git/config (a core.fsmonitor there
// runs on the owner's next git status) and got exit 0: the attached
// backend ignored sandbox.protected_paths. It now runs nothing in a
// writable workspace unless every protected path under that workspace is
// declared mounted read-only in the sandbox's container.
func TestAttachedProtectedPaths(t *testing.T) {
	c, _ := startAgent(t)
	f := sandboxtest.NewFixture(t, sandboxtest.Options{})
	ws := f.Workspace
	sub := filepath.Join(ws, "sub")
	const clean = "[core]\n\tbare = false\n"
	for _, dir := range []string{ws, sub} {
		if err := os.MkdirAll(filepath.Join(dir, ".git"), 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ".git", "config"), []byte(clean), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	run := func(a *agent.Attached, workspace string, protected []string, writable bool, script string) (*sandbox.Result, error) {
		spec := f.Spec(script)
		spec.Workspace = workspace
		spec.WorkspaceWritable = writable
		spec.AllowRoot = true // the test's agent runs as the test's user
		spec.ProtectedPaths = protected
		return a.Run(context.Background(), spec)
	}
	attack := `printf '[core]\n\tfsmonitor = "touch /tmp/pwned"\n' >> .git/config && echo appended`
	for _, tc := range []struct {
		name      string
		workspace string
		readOnly  []string
	}{
		{"no declaration", ws, nil},
		{"another path declared", ws, []string{ws + "/.github"}},
		{"a path under it declared", ws, []string{ws + "/.git/hooks"}},
		{"a sibling with its prefix declared", ws, []string{ws + "/.gi"}},
		{"relative, not where the sandbox mounts it", ws, []string{".git"}},
		// A workspace below the declared one has a .git of its own (a
		// repository cloned into the pod's workspace), which the pod did
		// not mount read-only.
		{"a workspace below the declared one", sub, []string{ws + "/.git"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := run(&agent.Attached{Conn: c, Root: "/", ReadOnlyPaths: tc.readOnly}, tc.workspace, []string{".git"}, true, attack)
			var se *sandbox.Error
			if !errors.As(err, &se) || !strings.Contains(err.Error(), "workspace "+tc.workspace+": protected path .git is not declared read-only") ||
				!strings.Contains(se.Help, "sandbox.attach.read_only_paths") {
				t.Fatalf("Run: %v %+v; want a refusal naming .git and the key", err, res)
			}
			if b, _ := os.ReadFile(filepath.Join(tc.workspace, ".git", "config")); string(b) != clean {
				t.Fatalf(".git/config was written: %q", b)
			}
		})
	}
	// A .git that is a link (an earlier sandbox left it in a persistent
	// workspace): the pod's read-only mount would show its target, while
	// the sandbox writes the target where it lies and host tools follow
	// the link there.
	t.Run("declared, but a link", func(t *testing.T) {
		linked := filepath.Join(ws, "linked")
		if err := os.MkdirAll(filepath.Join(linked, "x"), 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(linked, "x", "config"), []byte(clean), 0o666); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("x", filepath.Join(linked, ".git")); err != nil {
			t.Fatal(err)
		}
		res, err := run(&agent.Attached{Conn: c, Root: "/", ReadOnlyPaths: []string{linked + "/.git"}}, linked, []string{".git"}, true,
			`printf '[core]\n\tfsmonitor = "touch /tmp/pwned"\n' >> x/config && echo appended`)
		if err == nil || !strings.Contains(err.Error(), "is a symbolic link") {
			t.Fatalf("Run: %v %+v; want a refusal of the link", err, res)
		}
		if b, _ := os.ReadFile(filepath.Join(linked, "x", "config")); string(b) != clean {
			t.Fatalf("the link's target was written: %q", b)
		}
	})
	// Declared (here nothing is mounted: the declaration is trusted, which
	// is the point), or nothing to protect, or a read-only workspace: runs.
	for _, tc := range []struct {
		name      string
		a         *agent.Attached
		workspace string
		protected []string
		writable  bool
	}{
		{"declared", &agent.Attached{Conn: c, Root: "/", ReadOnlyPaths: []string{ws + "/.git"}}, ws, []string{".git"}, true},
		{"declared by a parent", &agent.Attached{Conn: c, Root: "/", ReadOnlyPaths: []string{ws + "/./.git/"}}, ws, []string{".git/hooks", ".git/config"}, true},
		{"declared by the whole workspace", &agent.Attached{Conn: c, Root: "/", ReadOnlyPaths: []string{ws}}, sub, []string{".git"}, true},
		{"nothing protected", &agent.Attached{Conn: c, Root: "/"}, ws, nil, true},
		{"read-only workspace", &agent.Attached{Conn: c, Root: "/", WorkspaceReadOnly: true}, ws, []string{".git"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := run(tc.a, tc.workspace, tc.protected, tc.writable, "echo ran")
			if err != nil || res.ExitCode != 0 || string(res.Stdout) != "ran\n" {
				t.Fatalf("Run: %v %+v", err, res)
			}
		})
	}
}

func TestUncovered(t *testing.T) {
	for _, tc := range []struct {
		workspace                 string
		protected, readOnly, want []string
	}{
		{"/w", []string{".git"}, nil, []string{".git"}},
		{"/w", []string{".git"}, []string{"/w/.git"}, nil},
		{"/w", []string{".git/"}, []string{"/w/./.git/"}, nil},
		{"/w", []string{".git/hooks"}, []string{"/w/.git"}, nil},
		{"/w", []string{".git"}, []string{"/w"}, nil},
		{"/w", []string{".git"}, []string{"/"}, nil},
		{"/w", []string{".git"}, []string{"/w/.git/hooks"}, []string{".git"}},
		{"/w", []string{".git"}, []string{"/w/.gi"}, []string{".git"}},
		{"/w", []string{".gitx"}, []string{"/w/.git"}, []string{".gitx"}},
		{"/w", []string{".git", "tools/hooks"}, []string{"/w/tools"}, []string{".git"}},
		{"/w/sub", []string{".git"}, []string{"/w/.git"}, []string{".git"}},
		{"/w", []string{".git"}, []string{".git"}, []string{".git"}},
		// Nothing outside the workspace is ever covered.
		{"/w", []string{"../x"}, []string{"/"}, []string{"../x"}},
		{"/w", []string{"/etc"}, []string{"/"}, []string{"/etc"}},
		{"", []string{".git"}, []string{"/"}, []string{".git"}},
	} {
		if got := agent.Uncovered(tc.workspace, tc.protected, tc.readOnly); !slices.Equal(got, tc.want) {
			t.Errorf("Uncovered(%q, %q, %q) = %q, want %q", tc.workspace, tc.protected, tc.readOnly, got, tc.want)
		}
	}
}

func TestProtectedWorkspaces(t *testing.T) {
	for _, tc := range []struct {
		protected, readOnly, want []string
	}{
		{[]string{".git"}, nil, nil},
		{[]string{".git"}, []string{"/workspace/.git"}, []string{"/workspace"}},
		{[]string{".git"}, []string{"/workspace/.git", "/other/.git"}, []string{"/other", "/workspace"}},
		{[]string{".git/hooks"}, []string{"/workspace/.git"}, []string{"/workspace"}},
		{[]string{".git", "tools/hooks"}, []string{"/workspace/.git"}, nil},
		{[]string{".git", "tools/hooks"}, []string{"/workspace/.git", "/workspace/tools/hooks"}, []string{"/workspace"}},
		{[]string{".git"}, []string{"/.git"}, []string{"/"}},
		{[]string{".git"}, []string{".git"}, nil},
		{[]string{".git"}, []string{"/workspace/.gitx"}, nil},
	} {
		if got := agent.ProtectedWorkspaces(tc.protected, tc.readOnly); !slices.Equal(got, tc.want) {
			t.Errorf("ProtectedWorkspaces(%q, %q) = %q, want %q", tc.protected, tc.readOnly, got, tc.want)
		}
	}
}

// A persistent docker sandbox keeps its agent directory, .agent, in its
// sessions root, which an earlier sandbox on the same root wrote when it
// ran without the agent (gatebridge not root: the container is its uid
// and may write the root). It left .agent a link to the invoker's home:
// the next start prepared req/ and out/ there (chmod, mkfifo) and had the
// engine mount them, and .agent itself read-only, by path: the home, with
// its keys, readable in the sandbox. An agent directory that is a link
// (or not a directory) is refused, and nothing is made through it.
func TestPrepareRefusesLinkedDir(t *testing.T) {
	root := t.TempDir()
	home := filepath.Join(root, "home")
	if err := os.MkdirAll(filepath.Join(home, "out"), 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, ".agent")
	if err := os.Symlink(home, link); err != nil {
		t.Fatal(err)
	}
	if err := agent.Prepare(link, -1, -1); err == nil {
		t.Error("Prepare of a directory that is a symbolic link succeeded")
	}
	if _, err := os.Lstat(filepath.Join(home, agent.DirReq)); err == nil {
		t.Errorf("Prepare made %s through the link", filepath.Join(home, agent.DirReq))
	}
	if fi, err := os.Stat(filepath.Join(home, "out")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the home's out/ was changed through the link: %v %v", fi.Mode(), err)
	}
	file := filepath.Join(root, "file")
	os.WriteFile(file, nil, 0o600)
	if err := agent.Prepare(file, -1, -1); err == nil {
		t.Error("Prepare of a regular file succeeded")
	}
}
