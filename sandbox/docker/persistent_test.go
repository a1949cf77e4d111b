package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// startSandbox starts a persistent sandbox removed at cleanup.
func startSandbox(t *testing.T, b *Backend, ws string, writable bool) *Sandbox {
	t.Helper()
	name := fmt.Sprintf("test-%d-%d", os.Getpid(), time.Now().UnixNano()%1e9)
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	sb, err := b.Start(context.Background(), StartOptions{Name: name, SessionsRoot: root, Workspace: ws, WorkspaceWritable: writable})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background(), name) })
	return sb
}

func runIn(t *testing.T, sb *Sandbox, ctx context.Context, script string, opts ...runOpt) (*sandbox.Result, error) {
	t.Helper()
	sess, err := os.MkdirTemp(sb.SessionsRoot(), "s-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sess) })
	spec := &sandbox.Spec{
		Command:    []string{"sh", "-c", script},
		Session:    newSession(t, sess),
		SessionEnv: sandboxtest.SessionEnv,
		KillGrace:  500 * time.Millisecond,
	}
	for _, o := range opts {
		o(spec)
	}
	return sb.Run(ctx, spec)
}

func TestPersistent(t *testing.T) { testPersistent(t, Config{}) }

// TestPersistentAgent: the same through `gatebridge agent`, and what a
// command can do to the agent's directory and binary.
func TestPersistentAgent(t *testing.T) {
	engine(t)
	sb := testPersistent(t, Config{Agent: agentBinary(t)})
	ctx := context.Background()
	t.Run("via-agent", func(t *testing.T) {
		r, err := runIn(t, sb, ctx, `true`)
		if err != nil || r.Info["via"] != "agent" {
			t.Fatalf("got %v %v", err, r)
		}
	})
	t.Run("req-and-binary-read-only", func(t *testing.T) { agentDirAttack(t, sb) })
}

// TestPersistentAgentReapsOrphans: with the agent as PID 1, the orphans
// commands leave behind (double-forked, their parent gone) are reaped,
// not left as zombies for the sandbox's life.
func TestPersistentAgentReapsOrphans(t *testing.T) {
	engine(t)
	b, _ := newBackend(t, Config{Agent: agentBinary(t), NoInit: true})
	sb := startSandbox(t, b, "", false)
	ctx := context.Background()
	r, err := runIn(t, sb, ctx, `cat /proc/1/cmdline | tr '\0' ' '`)
	if err != nil || !strings.Contains(out(r), "agent") {
		t.Fatalf("PID 1 is not the agent: %v %q", err, out(r))
	}
	for i := 0; i < 5; i++ {
		// setsid: out of the command's group, so its kill does not
		// reach them; they exit on their own and are orphans by then.
		if _, err := runIn(t, sb, ctx, `setsid sh -c 'sleep 0.2 & sleep 0.2 &' ; true`); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second)
	r, err = runIn(t, sb, ctx, `ps -o stat= | grep -c '^Z' || true`)
	if err != nil || out(r) != "0" {
		t.Fatalf("zombies left: %v %q", err, out(r))
	}
}

// TestPersistentShAgent: the same through the sh agent.
func TestPersistentShAgent(t *testing.T) {
	engine(t)
	sb := testPersistent(t, Config{Agent: AgentSh})
	t.Run("req-read-only", func(t *testing.T) { agentDirAttack(t, sb) })
}

// TestPersistentAgentRootUser: with the container user root (allowed),
// file permissions no longer keep req/ and the binary safe; the
// read-only mounts must.
func TestPersistentAgentRootUser(t *testing.T) {
	engine(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: the container user is the host user otherwise")
	}
	b, _ := newBackend(t, Config{Agent: agentBinary(t)})
	name := fmt.Sprintf("test-root-%d-%d", os.Getpid(), time.Now().UnixNano()%1e9)
	root := t.TempDir()
	os.Chmod(root, 0o755)
	sb, err := b.Start(context.Background(), StartOptions{Name: name, SessionsRoot: root, UID: 0, GID: 0, AllowRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background(), name) })
	r, err := runIn(t, sb, context.Background(), `id -u`)
	if err != nil || out(r) != "0" {
		t.Fatalf("not root inside: %v %q", err, out(r))
	}
	agentDirAttack(t, sb)
}

// agentDirAttack: a command that could write req/ could make the agent
// run anything at any time; one that could replace the binary would make
// every later sandbox run it. Both stay read-only, through every path the
// container has to them.
func agentDirAttack(t *testing.T, sb *Sandbox) {
	script := `for p in /gatebridge/agent/req /gatebridge/sessions/.agent/req; do
  echo '{"argv":["sh","-c","echo pwned"]}' > $p/0123456789abcdef0123456789abcdef.json 2>/dev/null && echo "wrote $p"
  mkdir $p/x 2>/dev/null && echo "mkdir $p"
  rm -f $p/wake 2>/dev/null; [ -p $p/wake ] || echo "removed $p/wake"
done
echo x >> /gatebridge/bin/gatebridge 2>/dev/null && echo "wrote the binary"
mv /gatebridge/sessions/.agent /gatebridge/sessions/.moved 2>/dev/null && echo "moved .agent"
# Its own lease, held open for writing, would keep it alive after a kill -9
# of gatebridge.
n=0
for L in /gatebridge/agent/req/*.lease; do
  [ -p "$L" ] && n=$((n+1))
  ( exec 8<>"$L" ) 2>/dev/null && echo "opened $L for writing"
done
[ "$n" -ge 1 ] || echo "no lease found"
echo done`
	r, err := runIn(t, sb, context.Background(), script)
	if err != nil || out(r) != "done" {
		t.Fatalf("got %v %q %q", err, out(r), r.Stderr)
	}
	if _, err := os.Stat(filepath.Join(sb.SessionsRoot(), ".agent", "req", "0123456789abcdef0123456789abcdef.json")); err == nil {
		t.Fatal("a request was planted on the host")
	}
}

func testPersistent(t *testing.T, cfg Config) *Sandbox {
	b, _ := newBackend(t, cfg)
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hi\n"), 0o644)
	os.Chmod(ws, 0o755)
	sb := startSandbox(t, b, ws, false)
	ctx := context.Background()

	t.Run("basics", func(t *testing.T) {
		r, err := runIn(t, sb, ctx, `cat hello.txt; echo "$FOO $PATH"; pwd; id -u; cat; exit 42`, withEnv("FOO=bar"),
			withSpec(func(s *sandbox.Spec) { s.Workspace = ws }))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(out(r), "\n")
		if r.ExitCode != 42 || len(lines) != 4 || lines[0] != "hi" || !strings.HasPrefix(lines[1], "bar "+DefaultSessionsPath+"/s-") ||
			!strings.HasSuffix(lines[1], "/bin:"+DefaultPath) || lines[2] != "/workspace" {
			t.Fatalf("got %d %q stderr %q", r.ExitCode, out(r), r.Stderr)
		}
		if r.Info["mode"] != "persistent" || r.Info["container_id"] != sb.ID() {
			t.Fatalf("info %v", r.Info)
		}
	})
	t.Run("not-found", func(t *testing.T) {
		r, err := runIn(t, sb, ctx, "", withSpec(func(s *sandbox.Spec) { s.Command = []string{"gb-no-such-command"} }))
		if err != nil || r.ExitCode != sandbox.ExitNotFound {
			t.Fatalf("%v %+v", err, r)
		}
		t.Logf("stderr %q", r.Stderr)
	})
	t.Run("stdin", func(t *testing.T) {
		r, err := runIn(t, sb, ctx, `wc -c`, withStdin("12345"))
		if err != nil || out(r) != "5" {
			t.Fatalf("got %v %q", err, r.Stdout)
		}
	})
	t.Run("readonly-workspace", func(t *testing.T) {
		r, err := runIn(t, sb, ctx, `touch /workspace/x 2>/dev/null || echo ro`)
		if err != nil || out(r) != "ro" {
			t.Fatalf("got %v %q", err, r.Stdout)
		}
		if _, err := runIn(t, sb, ctx, `true`, withSpec(func(s *sandbox.Spec) { s.Workspace = ws; s.WorkspaceWritable = true })); err == nil {
			t.Fatal("writable workspace on a read-only sandbox: no error")
		}
		if _, err := runIn(t, sb, ctx, `true`, withSpec(func(s *sandbox.Spec) { s.Workspace = t.TempDir() })); err == nil {
			t.Fatal("foreign workspace: no error")
		}
	})
	t.Run("session-outside-root", func(t *testing.T) {
		_, err := sb.Run(ctx, &sandbox.Spec{Command: []string{"true"}, Session: newSession(t, t.TempDir())})
		var se *sandbox.Error
		if !errors.As(err, &se) || !strings.Contains(err.Error(), "sessions root") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("bin-responses-protected", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("the mitigation needs a root host")
		}
		script := `cd "$GATEBRIDGE_SESSION_DIR"
for d in bin responses; do
  touch $d/x 2>/dev/null && echo "wrote $d"
  echo x >> $d/f 2>/dev/null && echo "appended $d/f"
  mv $d $d.old 2>/dev/null && echo "moved $d"
  rm -f $d/f 2>/dev/null; [ -f $d/f ] || echo "removed $d/f"
done
echo x > calls/c && echo calls-ok`
		r, err := runIn(t, sb, ctx, script, withSpec(func(s *sandbox.Spec) {
			for _, d := range []string{s.Session.Bin, s.Session.Responses} {
				os.Chmod(d, 0o777) // Run must tighten this
				os.WriteFile(filepath.Join(d, "f"), nil, 0o666)
				os.Chmod(filepath.Join(d, "f"), 0o666)
			}
		}))
		if err != nil || out(r) != "calls-ok" {
			t.Fatalf("got %v %q %q", err, out(r), r.Stderr)
		}
	})
	t.Run("timeout-kills-tree", func(t *testing.T) {
		start := time.Now()
		r, err := runIn(t, sb, ctx, `(sleep 300; echo leak) & trap "" TERM; echo started; sleep 300`,
			withSpec(func(s *sandbox.Spec) { s.Timeout = time.Second }))
		if err != nil || r.ExitCode != 124 || !r.TimedOut || out(r) != "started" {
			t.Fatalf("got %v %+v", err, r)
		}
		if d := time.Since(start); d > 8*time.Second {
			t.Fatalf("took %v", d)
		}
		r, err = runIn(t, sb, ctx, `ps -o pid,user,args | grep 'sleep 300' | grep -v grep; true`)
		if err != nil || out(r) != "" {
			t.Fatalf("leftover processes %v %q", err, out(r))
		}
	})
	t.Run("background-left-behind-is-killed", func(t *testing.T) {
		r, err := runIn(t, sb, ctx, `sleep 301 & echo bg`)
		if err != nil || out(r) != "bg" {
			t.Fatalf("got %v %q", err, out(r))
		}
		r, _ = runIn(t, sb, ctx, `ps -o args | grep 'sleep 301' | grep -v grep; true`)
		if out(r) != "" {
			t.Fatalf("leftover %q", out(r))
		}
	})
	t.Run("cancel", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(time.Second, cancel)
		r, err := runIn(t, sb, cctx, `sleep 300`)
		if err != nil || r.ExitCode != sandbox.ExitCanceled || !r.Canceled {
			t.Fatalf("got %v %+v", err, r)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := range 8 {
			wg.Go(func() {
				// TMPDIR is the sandbox's shared /tmp: one file per command.
				r, err := runIn(t, sb, ctx, fmt.Sprintf(`echo %d > "$TMPDIR/n.$$"; sleep 0.3; cat "$TMPDIR/n.$$"; exit %d`, i, i))
				if err != nil {
					errs <- err
				} else if out(r) != fmt.Sprint(i) || r.ExitCode != i {
					errs <- fmt.Errorf("run %d: got %d %q", i, r.ExitCode, out(r))
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
	t.Run("open-list", func(t *testing.T) {
		sb2, err := b.Open(ctx, sb.SandboxName())
		if err != nil {
			t.Fatal(err)
		}
		r, err := runIn(t, sb2, ctx, `echo reused`)
		if err != nil || out(r) != "reused" {
			t.Fatalf("got %v %q", err, r.Stdout)
		}
		list, err := b.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, in := range list {
			found = found || (in.Name == sb.SandboxName() && in.State == "running" && in.SessionsRoot == sb.SessionsRoot())
		}
		if !found {
			t.Fatalf("%s not in %+v", sb.SandboxName(), list)
		}
		if _, err := b.Start(ctx, StartOptions{Name: sb.SandboxName(), SessionsRoot: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "already exists") {
			t.Fatalf("second start: %v", err)
		}
	})
	return sb
}

func TestPersistentStopPrune(t *testing.T) {
	b, tag := newBackend(t, Config{})
	ctx := context.Background()
	sb := startSandbox(t, b, "", false)
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Open(ctx, sb.SandboxName()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("open after stop: %v", err)
	}
	if err := b.Stop(ctx, sb.SandboxName()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second stop: %v", err)
	}
	if _, err := runIn(t, sb, ctx, "true"); err == nil {
		t.Fatal("run in stopped sandbox: no error")
	}

	// A stopped persistent sandbox and an orphan per-command container
	// (dead owner pid) are pruned; a running sandbox is kept.
	stopped := startSandbox(t, b, "", false)
	if _, err := b.cli.ContainerKill(ctx, stopped.ID(), containerKillOpts("KILL")); err != nil {
		t.Fatal(err)
	}
	running := startSandbox(t, b, "", false)
	orphan := createOrphan(t, b, tag)

	removed, err := b.Prune(ctx, PruneOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !contains(removed, orphan) || contains(removed, ContainerPrefix+stopped.SandboxName()) {
		t.Fatalf("prune removed %v (orphan %s)", removed, orphan)
	}
	waitExited(t, b, stopped.ID())
	removed, err = b.Prune(ctx, PruneOptions{Persistent: true})
	if err != nil {
		t.Fatal(err)
	}
	if !contains(removed, ContainerPrefix+stopped.SandboxName()) || contains(removed, ContainerPrefix+running.SandboxName()) {
		t.Fatalf("prune -persistent removed %v", removed)
	}
	if _, err := b.Open(ctx, running.SandboxName()); err != nil {
		t.Fatal(err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// An owned sandbox (a protocol connection's) is refused by Open and kept
// by Prune while its owner lives; once the owner is gone (a crashed
// server), Prune removes it even though it still runs.
func TestOwnedSandboxPrunedWithOwner(t *testing.T) {
	b, tag := newBackend(t, Config{})
	ctx := context.Background()
	name := fmt.Sprintf("test-owned-%d-%d", os.Getpid(), time.Now().UnixNano()%1e9)
	root := t.TempDir()
	live, err := b.Start(ctx, StartOptions{Name: name, SessionsRoot: root, Owned: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background(), name) })
	if _, err := b.Open(ctx, name); err == nil || !strings.Contains(err.Error(), "belongs to the gatebridge process") {
		t.Fatalf("Open of an owned sandbox: %v", err)
	}

	// The same labels with a dead owner pid, running.
	l := b.labels(nil, map[string]string{"io.gatebridge.test": tag, LabelPersistent: name + "-dead", LabelOwned: "true"})
	l[LabelPID] = "999999999"
	res, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: b.cfg.Image, Entrypoint: []string{"sleep"}, Cmd: []string{"600"}, Labels: l},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.remove(context.Background(), res.ID) })
	if _, err := b.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	removed, err := b.Prune(ctx, PruneOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if contains(removed, ContainerPrefix+name) {
		t.Fatalf("prune removed the live owner's sandbox: %v", removed)
	}
	// Another gatebridge's prune on this host (tests run in parallel) may
	// be removing it already: Prune counts "removal in progress" as done,
	// so wait for the engine to finish.
	if !waitGone(ctx, b, res.ID, 20*time.Second) {
		t.Fatalf("the dead owner's running sandbox survived prune (removed %v)", removed)
	}
	if _, err := live.Run(ctx, &sandbox.Spec{Command: []string{"true"}, Session: newSession(t, mustMkdirTemp(t, root))}); err != nil {
		t.Fatalf("the live owned sandbox stopped working after prune: %v", err)
	}
}

func mustMkdirTemp(t *testing.T, root string) string {
	t.Helper()
	d, err := os.MkdirTemp(root, "s-")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// waitGone waits until the engine no longer knows container id.
func waitGone(ctx context.Context, b *Backend, id string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if _, err := b.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); err != nil {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPersistentNestedProtectedPaths: the attack on nested protected paths
// (sandboxtest.NestedProtectedAttack: rename a parent of a protected path,
// make a new one where it was, write a hook) in a persistent sandbox
// started with those protected paths, its commands run as execs. The
// parents are mount points for the sandbox's life; the check comes after
// Stop, which removes the mount point of the missing gen/hooks.
func TestPersistentNestedProtectedPaths(t *testing.T) {
	b, _ := newBackend(t, Config{})
	ctx := context.Background()
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Chmod(filepath.Dir(ws), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	script, check := sandboxtest.NestedProtectedAttack(t, ws)
	name := fmt.Sprintf("test-nested-%d-%d", os.Getpid(), time.Now().UnixNano()%1e9)
	root := t.TempDir()
	os.Chmod(root, 0o755)
	sb, err := b.Start(ctx, StartOptions{Name: name, SessionsRoot: root, Workspace: ws, WorkspaceWritable: true,
		ProtectedPaths: sandboxtest.NestedProtectedPaths})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background(), name) })
	res, err := runIn(t, sb, ctx, script, withSpec(func(s *sandbox.Spec) { s.Workspace, s.WorkspaceWritable = ws, true }))
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	check(t, res)
}

// seenWriter collects what a command streams and reports when its output
// holds want.
type seenWriter struct {
	sandboxtest.Buffer
	want string
	once sync.Once
	seen chan struct{}
}

func newSeenWriter(want string) *seenWriter {
	return &seenWriter{want: want, seen: make(chan struct{})}
}

func (w *seenWriter) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p)
	if strings.Contains(w.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

// forgePgid is a command that does what any command in a persistent
// sandbox can: it looks for the record of its own process group that the
// first exec wrapper wrote in the session's tmp/ (the command writes it),
// replaces it with $TARGET, says "ready" and sleeps, waiting for the
// host's signal. Without a record it says so, and "ready", all the same.
const forgePgid = `i=0
while [ "$i" -lt 200 ]; do
  for f in "$GATEBRIDGE_SESSION_DIR"/tmp/.gatebridge-exec-*.pid; do
    [ -s "$f" ] || continue
    read -r p <"$f" || continue
    if [ "$p" = "$$" ]; then
      printf '%s\n' "$TARGET" >"$f"
      echo "planted $TARGET"; echo ready
      exec sleep 30
    fi
  done
  sleep 0.01; i=$((i+1))
done
echo "no record"; echo ready
exec sleep 30`

// TestPersistentExecForgedProcessGroup: without an agent (the exec API
// fallback, as under Docker Desktop) the host signals a command by an exec
// that ran "kill -SIG -<pgid>" with the pgid read from a file in the
// session's tmp/, which the command writes. A command that replaced it
// turned the host's SIGTERM on another command of the sandbox, or with
// "1" on every process of the container (each got it under the first
// version). The signal must reach the command itself and nothing else.
func TestPersistentExecForgedProcessGroup(t *testing.T) {
	b, _ := newBackend(t, Config{})
	for _, tc := range []struct {
		name   string
		target func(victim string) string
	}{
		{"another command's group", func(v string) string { return v }},
		{"every process", func(string) string { return "1" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := startSandbox(t, b, "", false)
			ctx := context.Background()
			spec := func(script string, out io.Writer) *sandbox.Spec {
				sess, err := os.MkdirTemp(sb.SessionsRoot(), "s-")
				if err != nil {
					t.Fatal(err)
				}
				return &sandbox.Spec{Command: []string{"sh", "-c", script}, Session: newSession(t, sess), SessionEnv: sandboxtest.SessionEnv,
					Stdout: out, Timeout: 20 * time.Second, KillGrace: 500 * time.Millisecond}
			}
			// The victim: another command of the sandbox, leading its own
			// process group (the wrapper's setsid), which it says.
			vout := newSeenWriter("\n")
			vspec := spec(`echo "$$"; exec sleep 30`, vout)
			vctx, vcancel := context.WithCancel(ctx)
			defer vcancel()
			vdone := make(chan *sandbox.Result, 1)
			go func() { r, _ := sb.Run(vctx, vspec); vdone <- r }()
			select {
			case <-vout.seen:
			case <-time.After(10 * time.Second):
				t.Fatal("the victim did not start")
			}
			victim := strings.TrimSpace(vout.String())

			aout := newSeenWriter("ready")
			aspec := spec(forgePgid, aout)
			aspec.Env = []string{"TARGET=" + tc.target(victim)}
			aspec.Timeout = 8 * time.Second
			sigs := make(chan syscall.Signal, 1)
			aspec.Signals = sigs
			adone := make(chan *sandbox.Result, 1)
			go func() { r, _ := sb.Run(ctx, aspec); adone <- r }()
			select {
			case <-aout.seen:
			case <-time.After(10 * time.Second):
				t.Fatal("the attacker did not start")
			}
			t.Logf("attacker: %q", aout.String())
			sigs <- syscall.SIGTERM
			var ares *sandbox.Result
			select {
			case ares = <-adone:
			case <-time.After(30 * time.Second):
				t.Fatal("the attacker's run did not end")
			}
			select {
			case r := <-vdone:
				t.Fatalf("the victim (process group %s) got the signal meant for the attacker: %+v", victim, r)
			case <-time.After(time.Second):
			}
			if ares == nil || ares.TimedOut || ares.ExitCode != 128+int(syscall.SIGTERM) {
				t.Errorf("the attacker did not get the SIGTERM meant for it: %+v", ares)
			}
		})
	}
}
