package docker

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/moby/moby/client"
)

func TestRunBasics(t *testing.T) {
	b, _ := newBackend(t, Config{})
	ctx := context.Background()
	t.Run("exit0", func(t *testing.T) {
		t.Parallel()
		r := run(t, b, ctx, "echo out; echo err >&2")
		if r.ExitCode != 0 || out(r) != "out" || strings.TrimSpace(string(r.Stderr)) != "err" {
			t.Fatalf("got %+v", r)
		}
		if r.Info["image"] != TestImage || r.Info["container_id"] == "" {
			t.Fatalf("info %v", r.Info)
		}
	})
	t.Run("exit42", func(t *testing.T) {
		t.Parallel()
		if r := run(t, b, ctx, "exit 42"); r.ExitCode != 42 {
			t.Fatalf("exit %d", r.ExitCode)
		}
	})
	t.Run("stdin", func(t *testing.T) {
		t.Parallel()
		r := run(t, b, ctx, "wc -c; cat", withStdin("hello\n"))
		if got := strings.Fields(out(r)); len(got) != 1 || got[0] != "6" {
			t.Fatalf("stdout %q", r.Stdout)
		}
	})
	t.Run("no-stdin-is-devnull", func(t *testing.T) {
		t.Parallel()
		if r := run(t, b, ctx, "cat; echo done"); out(r) != "done" {
			t.Fatalf("stdout %q", r.Stdout)
		}
	})
	t.Run("env", func(t *testing.T) {
		t.Parallel()
		r := run(t, b, ctx, `echo "$FOO|$PATH|$TMPDIR|$GATEBRIDGE_CALLS_DIR|$GATEBRIDGE_RESPONSES_DIR|$(pwd)|$GATEBRIDGE_WAKE"`, withEnv("FOO=bar"))
		want := "bar|/gatebridge/session/bin:" + DefaultPath + "|/tmp|/gatebridge/session/calls|/gatebridge/session/responses|/workspace|"
		if out(r) != want {
			t.Fatalf("got  %q\nwant %q", out(r), want)
		}
	})
	t.Run("network", func(t *testing.T) {
		t.Parallel()
		r := run(t, b, ctx, `tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '`)
		if out(r) != "lo" {
			t.Fatalf("interfaces %q", out(r))
		}
	})
	t.Run("user-and-caps", func(t *testing.T) {
		t.Parallel()
		r := run(t, b, ctx, `id -u; id -g; grep CapEff /proc/self/status; grep NoNewPrivs /proc/self/status`)
		want := "65534\n65534\nCapEff:\t0000000000000000\nNoNewPrivs:\t1"
		if os.Geteuid() != 0 {
			want = strings.Replace(want, "65534\n65534", strconv.Itoa(os.Geteuid())+"\n"+strconv.Itoa(os.Getegid()), 1)
		}
		if out(r) != want {
			t.Fatalf("got %q want %q", out(r), want)
		}
	})
	t.Run("big-output-capped", func(t *testing.T) {
		t.Parallel()
		var live strings.Builder
		r := run(t, b, ctx, `head -c 300000 /dev/zero | tr '\0' x`, withSpec(func(s *sandbox.Spec) { s.MaxOutput = 1000; s.Stdout = &live }))
		if !r.Truncated || r.StdoutDropped != 299000 || live.Len() != 300000 {
			t.Fatalf("truncated=%v dropped=%d live=%d", r.Truncated, r.StdoutDropped, live.Len())
		}
	})
}

func TestRunNotFound(t *testing.T) {
	for _, noInit := range []bool{false, true} {
		b, _ := newBackend(t, Config{NoInit: noInit})
		r, err := runErr(t, b, context.Background(), "", withSpec(func(s *sandbox.Spec) { s.Command = []string{"gb-no-such-command"} }))
		if err != nil || r.ExitCode != sandbox.ExitNotFound {
			t.Fatalf("noInit=%v: %v %+v", noInit, err, r)
		}
	}
}

func TestRunFilesystem(t *testing.T) {
	b, _ := newBackend(t, Config{})
	ctx := context.Background()
	t.Run("rootfs-readonly", func(t *testing.T) {
		t.Parallel()
		r := run(t, b, ctx, `touch /x 2>/dev/null || echo ro; touch /tmp/x && echo tmp-ok`)
		if out(r) != "ro\ntmp-ok" {
			t.Fatalf("got %q", out(r))
		}
	})
	t.Run("workspace-readonly", func(t *testing.T) {
		t.Parallel()
		r := run(t, b, ctx, `touch /workspace/x 2>/dev/null || echo ro`)
		if out(r) != "ro" {
			t.Fatalf("got %q", out(r))
		}
	})
	t.Run("workspace-writable", func(t *testing.T) {
		t.Parallel()
		var ws string
		r := run(t, b, ctx, `echo hi > /workspace/x && echo ok`, withSpec(func(s *sandbox.Spec) {
			s.WorkspaceWritable = true
			ws = s.Workspace
			if os.Geteuid() == 0 {
				_ = os.Chown(ws, 65534, 65534)
			}
		}))
		if out(r) != "ok" {
			t.Fatalf("got %q %q", out(r), r.Stderr)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "x")); string(b) != "hi\n" {
			t.Fatalf("host sees %q", b)
		}
	})
	t.Run("session-modes", func(t *testing.T) {
		t.Parallel()
		var sess sandbox.SessionDirs
		script := `cd /gatebridge/session
for d in bin responses; do
  touch $d/x 2>/dev/null && echo "wrote $d"
  mv $d $d.old 2>/dev/null && echo "moved $d"
  rm -rf $d 2>/dev/null; [ -d $d ] || echo "removed $d"
  ln -s /etc $d.new 2>/dev/null && echo "linked $d"
done
touch victim 2>/dev/null && echo "wrote root"
mkdir calls/c1 && echo hi > calls/c1/gate && echo calls-ok
echo t > "$TMPDIR/t" && echo tmp-ok`
		r := run(t, b, ctx, script, withSpec(func(s *sandbox.Spec) {
			sess = s.Session
			os.WriteFile(filepath.Join(s.Session.Bin, "read_file"), []byte("#!/bin/sh\n"), 0o755)
			os.WriteFile(filepath.Join(s.Session.Responses, "1.exit"), []byte("0"), 0o644)
		}))
		if out(r) != "calls-ok\ntmp-ok" {
			t.Fatalf("got %q stderr %q", out(r), r.Stderr)
		}
		if _, err := os.Stat(filepath.Join(sess.Bin, "read_file")); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(sess.Responses, "1.exit")); err != nil {
			t.Fatal(err)
		}
		// The host can clean up what the container wrote.
		if err := os.RemoveAll(sess.Root); err != nil {
			t.Fatal(err)
		}
	})
}

func TestRunNonRootHost(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("simulates a non-root host with setpriv; needs root")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv not installed")
	}
	b, _ := newBackend(t, Config{User: "1000:1000"})
	base := t.TempDir()
	for _, d := range []string{base, filepath.Dir(base)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var root string
	r := run(t, b, context.Background(), `id -u; cd /gatebridge/session && mkdir -p calls/c1/args && echo x > calls/c1/args/0 && chmod 500 calls/c1/args && echo ok`,
		withSpec(func(s *sandbox.Spec) {
			root = filepath.Join(base, "s")
			if err := os.Rename(s.Session.Root, root); err != nil {
				t.Fatal(err)
			}
			s.Session = newSession(t, root)
			if err := exec.Command("chown", "-R", "1000:1000", root).Run(); err != nil {
				t.Fatal(err)
			}
		}))
	r2 := strings.ReplaceAll(out(r), "\n", " ")
	if r2 != "1000 ok" {
		t.Fatalf("got %q stderr %q", r2, r.Stderr)
	}
	cmd := exec.Command("setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", "sh", "-c", "chmod -R u+w "+root+"/calls && rm -rf "+root+"/calls/*")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("uid 1000 cannot clean up: %v %s", err, b)
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "calls")); len(ents) != 0 {
		t.Fatalf("left %v", ents)
	}
}

func TestRunTimeoutAndCancel(t *testing.T) {
	b, tag := newBackend(t, Config{})
	cli := b.Client()
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		r := run(t, b, context.Background(), `trap "" TERM; echo started; sleep 30`, withSpec(func(s *sandbox.Spec) {
			s.Timeout = 1 * time.Second
			s.KillGrace = 500 * time.Millisecond
			s.Labels = map[string]string{"io.gatebridge.test": tag + "-t"}
		}))
		if r.ExitCode != 124 || !r.TimedOut || r.Canceled || out(r) != "started" {
			t.Fatalf("got %+v", r)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("took %v", d)
		}
		if ids := containersWith(t, cli, tag+"-t"); len(ids) != 0 {
			t.Fatalf("left containers %v", ids)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(1500*time.Millisecond, cancel)
		r := run(t, b, ctx, `sleep 30`, withSpec(func(s *sandbox.Spec) {
			s.Labels = map[string]string{"io.gatebridge.test": tag + "-c"}
		}))
		if r.ExitCode != sandbox.ExitCanceled || r.TimedOut || !r.Canceled {
			t.Fatalf("got %+v", r)
		}
		if ids := containersWith(t, cli, tag+"-c"); len(ids) != 0 {
			t.Fatalf("left containers %v", ids)
		}
	})
	t.Run("cancel-before-run", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r, err := runErr(t, b, ctx, `sleep 30`, withSpec(func(s *sandbox.Spec) {
			s.Labels = map[string]string{"io.gatebridge.test": tag + "-c0"}
		}))
		if err == nil && !r.Canceled {
			t.Fatalf("got %+v", r)
		}
		if ids := containersWith(t, cli, tag+"-c0"); len(ids) != 0 {
			t.Fatalf("left containers %v", ids)
		}
	})
	if ids := containersWith(t, cli, tag); len(ids) != 0 {
		t.Fatalf("left containers %v", ids)
	}
}

func TestMissingImage(t *testing.T) {
	b, _ := newBackend(t, Config{Image: "gatebridge-missing:nope", PullProgress: new(strings.Builder)})
	_, err := runErr(t, b, context.Background(), "true")
	var se *sandbox.Error
	if !errors.As(err, &se) || !strings.Contains(se.Error(), "gatebridge-missing:nope") || !strings.Contains(se.Help, "docker load") {
		t.Fatalf("run: %#v", err)
	}
	err = b.Check(context.Background())
	if !errors.As(err, &se) || !strings.Contains(se.Error(), "gatebridge-missing:nope") || !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("check: %v", err)
	}
	t.Logf("check: %v\nhint: %s", err, se.Help)

	b2, _ := newBackend(t, Config{})
	if _, err := runErr(t, b2, context.Background(), "true"); err != nil {
		t.Fatal(err)
	}
	if err := b2.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestTestImageMissingHint(t *testing.T) {
	if h := imageHint(TestImage); !strings.Contains(h, "make test-image") {
		t.Fatal(h)
	}
}

func TestUnreachableEngine(t *testing.T) {
	b, err := New(Config{Client: mustClient(t, "unix:///nonexistent/docker.sock")})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Check(context.Background())
	var se *sandbox.Error
	if !errors.As(err, &se) || !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(se.Help, "DOCKER_HOST") {
		t.Fatalf("got %v", err)
	}
}

func mustClient(t *testing.T, host string) client.APIClient {
	t.Helper()
	c, err := client.New(client.WithHost(host))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Config.Wake decides ForcePoll, which bridge asks (TestWakePollThroughSession
// runs a session through it).
func TestWakePoll(t *testing.T) {
	b, _ := newBackend(t, Config{Wake: WakePoll})
	if !b.ForcePoll(context.Background()) {
		t.Fatal("Wake: poll does not force polling")
	}
	f, _ := newBackend(t, Config{Wake: WakeFIFO})
	if f.ForcePoll(context.Background()) {
		t.Fatal("Wake: fifo forces polling")
	}
	if !isDockerDesktop("Docker Desktop 4.30.0 (149282)") || isDockerDesktop("Debian GNU/Linux 12 (bookworm)") {
		t.Fatal("isDockerDesktop")
	}
}

func TestBuildTestImageIdempotent(t *testing.T) {
	cli := engine(t) // builds it when missing
	built, err := BuildTestImage(context.Background(), cli, TestImageOptions{})
	if err != nil || built {
		t.Fatalf("second build: built=%v err=%v", built, err)
	}
}

// A command is never run as uid 0 unless the spec allows root: Config.User
// "0:0" is refused (with a hint naming sandbox.allow_root) before any
// container exists; as root, a zero spec identity means nobody.
func TestContainerUserRefusesRoot(t *testing.T) {
	b, err := New(Config{User: "0:0", Client: &client.Client{}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Run(context.Background(), &sandbox.Spec{Command: []string{"true"}})
	if err == nil || !strings.Contains(err.Error(), "uid 0") {
		t.Fatalf("user 0:0 without AllowRoot: %v", err)
	}
	var se *sandbox.Error
	if !errors.As(err, &se) || !strings.Contains(se.Help, "sandbox.allow_root") {
		t.Errorf("hint does not name sandbox.allow_root: %#v", err)
	}
	if u, _, _, err := b.containerUser(0, 0, true); err != nil || u != "0:0" {
		t.Errorf("with AllowRoot: %q %v", u, err)
	}
	if os.Geteuid() == 0 {
		nb, _ := New(Config{Client: &client.Client{}})
		if u, _, _, err := nb.containerUser(0, 0, false); err != nil || u != NobodyUser {
			t.Errorf("zero spec identity as root: %q %v, want %s", u, err, NobodyUser)
		}
		if u, _, _, err := nb.containerUser(1234, 1234, false); err != nil || u != "1234:1234" {
			t.Errorf("spec 1234:1234 as root: %q %v", u, err)
		}
		if u, _, _, err := nb.containerUser(1234, 0, false); err == nil || !strings.Contains(err.Error(), "gid 0") {
			t.Errorf("spec 1234:0 as root without AllowRoot: %q %v", u, err)
		}
	}
}
