// Package sandboxtest is the conformance suite every [sandbox.Backend] must
// pass. It is for tests only; nothing else imports it.
//
//	func TestBackend(t *testing.T) {
//		sandboxtest.Run(t, func(t *testing.T) sandbox.Backend { return mybackend.New() },
//			sandboxtest.Options{Isolated: true})
//	}
//
// Scripts run under /bin/sh -c and use only POSIX utilities that busybox,
// dash and bash provide. The session and workspace directories are created
// mode 0777 (so an unprivileged container user can use them, and so only a
// read-only mount can make the isolation checks pass) under parents made
// traversable (0755).
package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
	"github.com/gatebridge/gatebridge/internal/hint"
	"github.com/gatebridge/gatebridge/sandbox"
)

// Options tune the suite to a backend.
type Options struct {
	// Isolated enables the isolation checks: bin/ and responses/ not
	// writable, the workspace read-only unless WorkspaceWritable, only the
	// lo network interface, host files outside the mounts invisible, no
	// capabilities, host processes invisible.
	Isolated bool
	// NoLeftovers fails t when a process whose argv holds marker still runs
	// on the host. Nil scans this host's /proc, which sees local, bwrap and
	// local docker engine processes alike.
	NoLeftovers func(t *testing.T, marker string)
	// Serial disables t.Parallel in the subtests.
	Serial bool
	// Shell runs the scripts; "" means /bin/sh.
	Shell string
}

// Timing of the scripts that must be stopped.
const (
	shortTimeout = 1500 * time.Millisecond
	shortGrace   = 300 * time.Millisecond
	safety       = 30 * time.Second // bound on anything that should be quick
)

// Fixture is a fake session and workspace on the host.
type Fixture struct {
	Session   sandbox.SessionDirs
	Workspace string
	// Secret is a file outside every mount; its content is SecretText.
	Secret     string
	SecretText string
	shell      string
}

// NewFixture creates a session (bin/ calls/ responses/ tmp/), a workspace
// holding ws-marker, and a secret file elsewhere, under t.TempDir.
func NewFixture(t *testing.T, opt Options) *Fixture {
	t.Helper()
	root := traversableTempDir(t)
	f := &Fixture{
		Session:    sandbox.SessionDirs(mailbox.LayoutAt(filepath.Join(root, "session"))),
		Workspace:  filepath.Join(root, "workspace"),
		SecretText: "gatebridge-secret-" + strconv.Itoa(rand.IntN(1e9)),
		shell:      opt.Shell,
	}
	if f.shell == "" {
		f.shell = "/bin/sh"
	}
	for _, d := range []string{f.Session.Root, f.Session.Bin, f.Session.Calls, f.Session.Responses, f.Session.Tmp, f.Workspace} {
		mkdir(t, d, 0o777)
	}
	write(t, filepath.Join(f.Workspace, "ws-marker"), "workspace-here\n", 0o666)
	write(t, filepath.Join(f.Session.Responses, "pre"), "response-here\n", 0o666)
	write(t, filepath.Join(f.Session.Bin, "gb-hello"), "#!/bin/sh\necho hello-from-bin \"$@\"\n", 0o755)
	outside := traversableTempDir(t)
	f.Secret = filepath.Join(outside, "secret")
	write(t, f.Secret, f.SecretText, 0o644)
	return f
}

// traversableTempDir returns t.TempDir() with it and its parent mode 0755,
// so that an unprivileged sandbox user can reach paths below it.
func traversableTempDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func mkdir(t *testing.T, d string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(d, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, mode); err != nil { // umask
		t.Fatal(err)
	}
}

func write(t *testing.T, name, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(name, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(name, mode); err != nil {
		t.Fatal(err)
	}
}

// Spec returns a Spec running script under the shell with the fixture's
// session (its env as bridge gives it: [SessionEnv]) and workspace, a 30 s
// safety timeout and a short kill grace.
func (f *Fixture) Spec(script string) *sandbox.Spec {
	return &sandbox.Spec{
		Command:    []string{f.shell, "-c", script},
		Session:    f.Session,
		SessionEnv: SessionEnv,
		Workspace:  f.Workspace,
		Timeout:    safety,
		KillGrace:  shortGrace,
	}
}

// SessionEnv is the [sandbox.Spec.SessionEnv] bridge's Session.Run sets:
// PATH and TMPDIR, then the mailbox's names for the session's directories.
func SessionEnv(inside sandbox.SessionDirs, basePath string) []string {
	return append(sandbox.PathEnv(inside, basePath), mailbox.DirsEnv(mailbox.Layout(inside))...)
}

// Buffer is a bytes.Buffer safe for concurrent use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Poll checks cond every 10 ms until it holds or d passes, and reports
// whether it held.
func Poll(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// Marker returns a unique number usable as `sleep <marker>` (about 10
// years), so the sleeping process can be found by its argv.
func Marker() string { return strconv.Itoa(300_000_000 + rand.IntN(600_000_000)) }

// HostNoLeftovers fails t when a process on this host has marker as an
// argument. Zombies (empty cmdline) do not count.
func HostNoLeftovers(t *testing.T, marker string) {
	t.Helper()
	if pids := HostProcesses(marker); len(pids) > 0 {
		t.Errorf("processes with %q in argv still run after Run returned: %v", marker, pids)
	}
}

// KillMarked sends SIGKILL to every host process with marker as an
// argument (a test's cleanup of what it may have left running).
func KillMarked(marker string) {
	for _, p := range HostProcesses(marker) {
		pid, _, _ := strings.Cut(p, ":")
		if n, err := strconv.Atoi(pid); err == nil {
			syscall.Kill(n, syscall.SIGKILL)
		}
	}
}

// RequireBackend skips t when b cannot run here ([sandbox.Checker]),
// unless GATEBRIDGE_REQUIRE_BACKENDS (a comma list, e.g. "bwrap,docker")
// names it: then it fails.
func RequireBackend(t *testing.T, b sandbox.Backend) {
	t.Helper()
	ch, ok := b.(sandbox.Checker)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := ch.Check(ctx)
	if err == nil {
		return
	}
	msg := err.Error()
	var se *sandbox.Error
	if errors.As(err, &se) && se.Help != "" {
		msg += "\nhint: " + se.Help
	}
	if slices.Contains(strings.Split(os.Getenv("GATEBRIDGE_REQUIRE_BACKENDS"), ","), b.Name()) {
		t.Fatalf("backend %s required by GATEBRIDGE_REQUIRE_BACKENDS but unusable: %s", b.Name(), msg)
	}
	t.Skipf("backend %s unusable: %s", b.Name(), msg)
}

// HostProcesses lists the host pids with marker as an argument.
func HostProcesses(marker string) []string {
	var pids []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		for _, arg := range bytes.Split(b, []byte{0}) {
			if string(arg) == marker {
				pids = append(pids, e.Name()+":"+strings.ReplaceAll(string(bytes.TrimRight(b, "\x00")), "\x00", " "))
				break
			}
		}
	}
	return pids
}

// Run runs the conformance suite against the backends newBackend returns
// (one per subtest).
func Run(t *testing.T, newBackend func(t *testing.T) sandbox.Backend, opt Options) {
	if opt.NoLeftovers == nil {
		opt.NoLeftovers = HostNoLeftovers
	}
	s := &suite{opt: opt, newBackend: newBackend}
	for _, tc := range []struct {
		name string
		fn   func(*testing.T)
		iso  bool
	}{
		{"ExitCodes", s.exitCodes, false},
		{"Signal", s.signal, false},
		{"Output", s.output, false},
		{"Stdin", s.stdin, false},
		{"NoStdin", s.noStdin, false},
		{"StdinNeverEnds", s.stdinNeverEnds, false},
		{"Env", s.env, false},
		{"BinOnPath", s.binOnPath, false},
		{"Cwd", s.cwd, false},
		{"Dir", s.dir, false},
		{"RelativeCommand", s.relativeCommand, false},
		{"Mailbox", s.mailbox, false},
		{"Tmpdir", s.tmpdir, false},
		{"WorkspaceWritable", s.workspaceWritable, false},
		{"Timeout", s.timeout, false},
		{"KillGrace", s.killGrace, false},
		{"Cancel", s.cancel, false},
		{"Signals", s.signals, false},
		{"SignalsDuringGrace", s.signalsDuringGrace, false},
		{"OutputCap", s.outputCap, false},
		{"SlowLiveWriter", s.slowLiveWriter, false},
		{"BackgroundHoldsStdout", s.background, false},
		{"ReadOnlySession", s.readOnlySession, true},
		{"ReadOnlyWorkspace", s.readOnlyWorkspace, true},
		{"NestedProtectedPaths", s.nestedProtected, true},
		{"NetworkLoopbackOnly", s.network, true},
		{"HostFilesHidden", s.hostFiles, true},
		{"NoCapabilities", s.capabilities, true},
		{"HostProcessesHidden", s.hostProcesses, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.iso && !opt.Isolated {
				t.Skip("backend does not isolate")
			}
			if !opt.Serial {
				t.Parallel()
			}
			tc.fn(t)
		})
	}
}

type suite struct {
	opt        Options
	newBackend func(t *testing.T) sandbox.Backend
}

// run runs spec on a new backend and fails t on a Run error.
func (s *suite) run(t *testing.T, ctx context.Context, spec *sandbox.Spec) *sandbox.Result {
	t.Helper()
	b := s.newBackend(t)
	res, err := b.Run(ctx, spec)
	if err != nil {
		if h := hint.Of(err); h != "" {
			t.Fatalf("%s: Run: %v\nhint: %s", b.Name(), err, h)
		}
		t.Fatalf("%s: Run: %v", b.Name(), err)
	}
	if res == nil {
		t.Fatalf("%s: Run returned nil result and nil error", b.Name())
	}
	return res
}

func (s *suite) script(t *testing.T, f *Fixture, script string) *sandbox.Result {
	t.Helper()
	return s.run(t, context.Background(), f.Spec(script))
}

func wantExit(t *testing.T, res *sandbox.Result, code int) {
	t.Helper()
	if res.ExitCode != code {
		t.Fatalf("exit code %d, want %d\nstdout: %q\nstderr: %q", res.ExitCode, code, res.Stdout, res.Stderr)
	}
}

func (s *suite) exitCodes(t *testing.T) {
	f := NewFixture(t, s.opt)
	for _, code := range []int{0, 1, 42} {
		res := s.script(t, f, fmt.Sprintf("exit %d", code))
		wantExit(t, res, code)
		if res.TimedOut || res.Canceled || res.Truncated {
			t.Errorf("exit %d: unexpected flags %+v", code, res)
		}
	}
}

// signal: a command killed by signal N exits 128+N. The script is not
// exec'd by a pid-1 shell that would ignore the signal: a backend running
// the command as a namespace's pid 1 needs an init in front of it.
func (s *suite) signal(t *testing.T) {
	f := NewFixture(t, s.opt)
	res := s.script(t, f, "kill -TERM $$; sleep 5")
	wantExit(t, res, 128+15)
}

func (s *suite) output(t *testing.T) {
	f := NewFixture(t, s.opt)
	spec := f.Spec("printf 'out-1\\n'; printf 'err-1\\n' >&2; printf 'out-2\\n'")
	var out, errb Buffer
	spec.Stdout, spec.Stderr = &out, &errb
	res := s.run(t, context.Background(), spec)
	wantExit(t, res, 0)
	if got := string(res.Stdout); got != "out-1\nout-2\n" {
		t.Errorf("captured stdout %q", got)
	}
	if got := string(res.Stderr); got != "err-1\n" {
		t.Errorf("captured stderr %q", got)
	}
	if got := out.String(); got != "out-1\nout-2\n" {
		t.Errorf("streamed stdout %q", got)
	}
	if got := errb.String(); got != "err-1\n" {
		t.Errorf("streamed stderr %q", got)
	}
	if res.Duration <= 0 {
		t.Errorf("Duration %v", res.Duration)
	}
}

func (s *suite) stdin(t *testing.T) {
	f := NewFixture(t, s.opt)
	spec := f.Spec("cat; echo done")
	spec.Stdin = strings.NewReader("hello\nworld\n")
	res := s.run(t, context.Background(), spec)
	wantExit(t, res, 0)
	if got := string(res.Stdout); got != "hello\nworld\ndone\n" {
		t.Errorf("stdout %q", got)
	}
}

func (s *suite) noStdin(t *testing.T) {
	f := NewFixture(t, s.opt)
	spec := f.Spec("cat; echo eof")
	spec.Timeout = 10 * time.Second
	res := s.run(t, context.Background(), spec)
	wantExit(t, res, 0)
	if got := string(res.Stdout); got != "eof\n" {
		t.Errorf("stdout %q (nil Stdin must read as empty)", got)
	}
}

// stdinNeverEnds: a Stdin reader that never returns EOF does not hold Run
// once the command has exited.
func (s *suite) stdinNeverEnds(t *testing.T) {
	f := NewFixture(t, s.opt)
	spec := f.Spec("read line; echo \"got $line\"")
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	go pw.Write([]byte("first\n"))
	spec.Stdin = pr
	res := s.run(t, context.Background(), spec)
	wantExit(t, res, 0)
	if got := string(res.Stdout); got != "got first\n" {
		t.Errorf("stdout %q", got)
	}
	if res.Duration > 10*time.Second {
		t.Errorf("Duration %v: Run waited for Stdin", res.Duration)
	}
}

func (s *suite) env(t *testing.T) {
	f := NewFixture(t, s.opt)
	spec := f.Spec(`for v in ` + mailbox.EnvCallsDir + ` ` + mailbox.EnvResponsesDir + ` TMPDIR; do
	eval "d=\${$v}"
	[ -n "$d" ] || { echo "$v unset"; exit 3; }
	[ -d "$d" ] || { echo "$v=$d is not a directory"; exit 4; }
done
printf '%s\n' "FOO=$FOO" "EMPTY=${EMPTY-unset}"`)
	spec.Env = []string{"FOO=bar baz", "EMPTY="}
	res := s.run(t, context.Background(), spec)
	wantExit(t, res, 0)
	if got := string(res.Stdout); got != "FOO=bar baz\nEMPTY=\n" {
		t.Errorf("stdout %q", got)
	}
}

func (s *suite) binOnPath(t *testing.T) {
	f := NewFixture(t, s.opt)
	res := s.script(t, f, `first=${PATH%%:*}
[ -x "$first/gb-hello" ] || { echo "first PATH element $first has no gb-hello"; exit 3; }
gb-hello a 'b c'`)
	wantExit(t, res, 0)
	if got := string(res.Stdout); got != "hello-from-bin a b c\n" {
		t.Errorf("stdout %q", got)
	}
}

func (s *suite) cwd(t *testing.T) {
	f := NewFixture(t, s.opt)
	res := s.script(t, f, "cat ws-marker")
	wantExit(t, res, 0)
	if got := string(res.Stdout); got != "workspace-here\n" {
		t.Errorf("stdout %q", got)
	}
}

// relativeCommand: Command[0] given as a path relative to the working
// directory (./tool, sub/tool) runs from there, as a shell would run it.
func (s *suite) relativeCommand(t *testing.T) {
	f := NewFixture(t, s.opt)
	if err := os.Mkdir(filepath.Join(f.Workspace, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(f.Workspace, "tool"), "#!/bin/sh\necho top \"$@\"\n", 0o755)
	write(t, filepath.Join(f.Workspace, "sub", "tool"), "#!/bin/sh\necho sub \"$@\"\n", 0o755)
	for _, tc := range []struct {
		dir  string
		argv []string
		want string
	}{
		{"", []string{"./tool", "a"}, "top a\n"},
		{"", []string{"sub/tool", "b"}, "sub b\n"},
		{"sub", []string{"./tool", "c"}, "sub c\n"},
		{"sub", []string{"../tool", "d"}, "top d\n"},
	} {
		spec := f.Spec("")
		spec.Command, spec.Dir = tc.argv, tc.dir
		res := s.run(t, context.Background(), spec)
		if res.ExitCode != 0 || string(res.Stdout) != tc.want {
			t.Errorf("dir %q argv %q: exit %d stdout %q stderr %q, want %q", tc.dir, tc.argv, res.ExitCode, res.Stdout, res.Stderr, tc.want)
		}
	}
}

// dir: Spec.Dir starts the command in a subdirectory of the workspace
// (the whole workspace still visible), and a Dir that leaves the
// workspace is refused before anything runs.
func (s *suite) dir(t *testing.T) {
	f := NewFixture(t, s.opt)
	if err := os.Mkdir(filepath.Join(f.Workspace, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(f.Workspace, "sub", "inner"), "inner-here\n", 0o644)
	spec := f.Spec("cat inner ../ws-marker")
	spec.Dir = "sub"
	res := s.run(t, context.Background(), spec)
	wantExit(t, res, 0)
	if got := string(res.Stdout); got != "inner-here\nworkspace-here\n" {
		t.Errorf("stdout %q", got)
	}
	for _, bad := range []string{"../..", "/etc", "sub/../../x"} {
		spec := f.Spec("echo ran")
		spec.Dir = bad
		res, err := s.newBackend(t).Run(context.Background(), spec)
		if err == nil {
			t.Errorf("Dir %q: no error (exit %d, stdout %q)", bad, res.ExitCode, res.Stdout)
		}
	}
}

// mailbox: a file the command writes in calls/ shows up on the host while
// the command runs, and a response the host writes then shows up inside.
func (s *suite) mailbox(t *testing.T) {
	f := NewFixture(t, s.opt)
	spec := f.Spec(strings.NewReplacer("@C@", mailbox.EnvCallsDir, "@R@", mailbox.EnvResponsesDir, "@READY@", mailbox.FileReady,
		"@EXIT@", mailbox.ExtExit, "@OUT@", mailbox.ExtStdout).Replace(`cat "$@R@/pre"
mkdir "$@C@/c1" && printf 'ping' > "$@C@/c1/@READY@" || exit 3
i=0
while [ ! -f "$@R@/c1@EXIT@" ]; do
	i=$((i+1)); [ $i -lt 2000 ] || exit 4
	sleep 0.01 2>/dev/null || sleep 1
done
cat "$@R@/c1@OUT@"`))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	answered := make(chan error, 1)
	go func() {
		answered <- func() error {
			for ctx.Err() == nil {
				b, err := os.ReadFile(filepath.Join(f.Session.Calls, "c1", mailbox.FileReady))
				if err == nil && string(b) == "ping" {
					if err := os.WriteFile(filepath.Join(f.Session.Responses, "c1"+mailbox.ExtStdout), []byte("pong\n"), 0o644); err != nil {
						return err
					}
					return os.WriteFile(filepath.Join(f.Session.Responses, "c1"+mailbox.ExtExit), []byte("0"), 0o644)
				}
				time.Sleep(5 * time.Millisecond)
			}
			return errors.New("host never saw calls/c1/ready")
		}()
	}()
	res := s.run(t, ctx, spec)
	cancel()
	if err := <-answered; err != nil {
		t.Error(err)
	}
	wantExit(t, res, 0)
	if got := string(res.Stdout); got != "response-here\npong\n" {
		t.Errorf("stdout %q", got)
	}
}

func (s *suite) tmpdir(t *testing.T) {
	f := NewFixture(t, s.opt)
	res := s.script(t, f, `printf tmp-data > "$TMPDIR/t" && cat "$TMPDIR/t"`)
	wantExit(t, res, 0)
	if got := string(res.Stdout); got != "tmp-data" {
		t.Errorf("stdout %q", got)
	}
	// An isolating backend gives TMPDIR its own size-limited tmpfs, not the
	// session's tmp/ on the host (whose filesystem is often host memory);
	// local has no such thing.
	if _, err := os.Stat(filepath.Join(f.Session.Tmp, "t")); s.opt.Isolated && err == nil {
		t.Errorf("$TMPDIR is the session's tmp/ on the host: writes there are not bounded by tmp_size")
	}
}

func (s *suite) workspaceWritable(t *testing.T) {
	f := NewFixture(t, s.opt)
	spec := f.Spec("printf new > ws-new")
	spec.WorkspaceWritable = true
	res := s.run(t, context.Background(), spec)
	wantExit(t, res, 0)
	if b, err := os.ReadFile(filepath.Join(f.Workspace, "ws-new")); err != nil || string(b) != "new" {
		t.Errorf("host view of ws-new: %q, %v", b, err)
	}
}

// startedWriter closes started when "started" has been streamed.
type startedWriter struct {
	Buffer
	word    string
	once    sync.Once
	started chan struct{}
}

func newStartedWriter() *startedWriter { return newWordWriter("started") }

// newWordWriter returns a startedWriter whose started closes at word.
func newWordWriter(word string) *startedWriter {
	return &startedWriter{word: word, started: make(chan struct{})}
}

func (w *startedWriter) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p)
	if strings.Contains(w.Buffer.String(), w.word) {
		w.once.Do(func() { close(w.started) })
	}
	return n, err
}

func (s *suite) timeout(t *testing.T) {
	f := NewFixture(t, s.opt)
	m := Marker()
	spec := f.Spec("sleep " + m + " & echo started; sleep " + m)
	spec.Timeout = shortTimeout
	res := s.run(t, context.Background(), spec)
	wantExit(t, res, sandbox.ExitTimedOut)
	if !res.TimedOut || res.Canceled {
		t.Errorf("TimedOut %v Canceled %v", res.TimedOut, res.Canceled)
	}
	if !strings.Contains(string(res.Stdout), "started") {
		t.Errorf("stdout %q: the command never started", res.Stdout)
	}
	if res.Duration < shortTimeout || res.Duration > shortTimeout+shortGrace+5*time.Second {
		t.Errorf("Duration %v for timeout %v", res.Duration, shortTimeout)
	}
	s.opt.NoLeftovers(t, m)
}

// killGrace: processes ignoring SIGTERM get SIGKILL after the grace.
func (s *suite) killGrace(t *testing.T) {
	f := NewFixture(t, s.opt)
	m := Marker()
	spec := f.Spec("trap '' TERM; sleep " + m + " & echo started; sleep " + m + "; echo survived")
	spec.Timeout = shortTimeout
	res := s.run(t, context.Background(), spec)
	wantExit(t, res, sandbox.ExitTimedOut)
	if strings.Contains(string(res.Stdout), "survived") || !strings.Contains(string(res.Stdout), "started") {
		t.Errorf("stdout %q", res.Stdout)
	}
	if res.Duration < shortTimeout+shortGrace/2 {
		t.Errorf("Duration %v: SIGKILL came before the grace %v", res.Duration, shortGrace)
	}
	s.opt.NoLeftovers(t, m)
}

func (s *suite) cancel(t *testing.T) {
	f := NewFixture(t, s.opt)
	m := Marker()
	spec := f.Spec("sleep " + m + " & echo started; sleep " + m)
	w := newStartedWriter()
	spec.Stdout = w
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-w.started:
		case <-time.After(safety / 2):
		}
		cancel()
	}()
	res := s.run(t, ctx, spec)
	wantExit(t, res, sandbox.ExitCanceled)
	if !res.Canceled || res.TimedOut {
		t.Errorf("Canceled %v TimedOut %v", res.Canceled, res.TimedOut)
	}
	if res.Duration > safety/2 {
		t.Errorf("Duration %v: cancellation was not prompt", res.Duration)
	}
	s.opt.NoLeftovers(t, m)
}

// signals: a signal sent through Spec.Signals reaches every process of the
// command, not only the main one: the shell's trap runs and the background
// sleep, in the same group, dies (the marker must not survive). A second
// command killed by SIGTERM exits 143. (Not SIGINT: a test run from a
// background job inherits SIGINT ignored, and so would the command.)
func (s *suite) signals(t *testing.T) {
	f := NewFixture(t, s.opt)
	m := Marker()
	spec := f.Spec("trap 'echo trapped; exit 7' HUP; sleep " + m + " & echo started; wait")
	signalAt(spec, "started", syscall.SIGHUP)
	res := s.run(t, context.Background(), spec)
	wantExit(t, res, 7)
	if !strings.Contains(string(res.Stdout), "trapped") {
		t.Errorf("stdout %q: the trap did not run", res.Stdout)
	}
	if res.Canceled || res.TimedOut {
		t.Errorf("Canceled %v TimedOut %v: a signal is neither", res.Canceled, res.TimedOut)
	}
	s.opt.NoLeftovers(t, m)

	// exec: the signal reaches either the shell or sleep, never a child
	// between fork and exec (which keeps running, as under any terminal).
	spec = f.Spec("echo started; exec sleep " + m)
	signalAt(spec, "started", syscall.SIGTERM)
	res = s.run(t, context.Background(), spec)
	wantExit(t, res, 128+int(syscall.SIGTERM))
	s.opt.NoLeftovers(t, m)
}

// signalAt sends sig through spec.Signals once the command has written
// word to its stdout (or gives up after half the safety bound).
func signalAt(spec *sandbox.Spec, word string, sig syscall.Signal) {
	w := newWordWriter(word)
	spec.Stdout = w
	sigs := make(chan syscall.Signal, 1)
	spec.Signals = sigs
	go func() {
		select {
		case <-w.started:
			sigs <- sig
		case <-time.After(safety / 2):
		}
	}()
}

// signalsDuringGrace: a signal sent through Spec.Signals after the
// timeout's SIGTERM, while the grace runs, still reaches the command: a
// command that traps TERM ends at the HUP it gets then, not at the SIGKILL
// a long grace later. The result is still the timeout's.
func (s *suite) signalsDuringGrace(t *testing.T) {
	const grace = 10 * time.Second
	f := NewFixture(t, s.opt)
	m := Marker()
	spec := f.Spec("trap 'echo got-term' TERM; trap 'echo got-hup; exit 7' HUP; sleep " + m +
		" & echo started; while :; do sleep 1; done")
	spec.Timeout, spec.KillGrace = shortTimeout, grace
	signalAt(spec, "got-term", syscall.SIGHUP)
	res := s.run(t, context.Background(), spec)
	wantExit(t, res, sandbox.ExitTimedOut)
	if !res.TimedOut || res.Canceled {
		t.Errorf("TimedOut %v Canceled %v", res.TimedOut, res.Canceled)
	}
	if !strings.Contains(string(res.Stdout), "got-hup") {
		t.Errorf("stdout %q: the HUP sent during the grace did not reach the command", res.Stdout)
	}
	if res.Duration > shortTimeout+grace/2 {
		t.Errorf("Duration %v: the command ran until SIGKILL", res.Duration)
	}
	s.opt.NoLeftovers(t, m)
}

// slowLiveWriter: a live writer that holds up the copy (a client that
// reads slowly) loses nothing, although the command has long exited and
// its output sat in the pipe meanwhile.
func (s *suite) slowLiveWriter(t *testing.T) {
	f := NewFixture(t, s.opt)
	spec := f.Spec("i=0; while [ $i -lt 400 ]; do printf '%0511d\\n' $i; i=$((i+1)); done")
	w := &slowWriter{delay: 600 * time.Millisecond}
	spec.Stdout = w
	res := s.run(t, context.Background(), spec)
	wantExit(t, res, 0)
	if got := w.Len(); got != 400*512 {
		t.Fatalf("live writer got %d bytes, want %d", got, 400*512)
	}
}

// slowWriter sleeps once, in the first Write after 150 KB: by then the
// command has written the rest into the pipe and exited.
type slowWriter struct {
	Buffer
	delay time.Duration
	once  sync.Once
}

func (w *slowWriter) Write(p []byte) (int, error) {
	if w.Len() > 150<<10 {
		w.once.Do(func() { time.Sleep(w.delay) })
	}
	return w.Buffer.Write(p)
}

func (b *Buffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Len()
}

func (s *suite) outputCap(t *testing.T) {
	f := NewFixture(t, s.opt)
	spec := f.Spec(`printf HEAD; dd if=/dev/zero bs=1000 count=100 2>/dev/null | tr '\000' x; printf TAIL
printf EHEAD >&2; dd if=/dev/zero bs=1000 count=50 2>/dev/null | tr '\000' y >&2; printf ETAIL >&2`)
	spec.MaxOutput = 1000
	var out, errb Buffer
	spec.Stdout, spec.Stderr = &out, &errb
	res := s.run(t, context.Background(), spec)
	wantExit(t, res, 0)
	check := func(name string, got []byte, dropped int64, streamed string, head, tail string, total int) {
		t.Helper()
		if !bytes.HasPrefix(got, []byte(head)) || !bytes.HasSuffix(got, []byte(tail)) {
			t.Errorf("%s: captured %d bytes lack head %q or tail %q", name, len(got), head, tail)
		}
		if want := int64(total - 1000); dropped != want {
			t.Errorf("%s: dropped %d, want %d", name, dropped, want)
		}
		if len(streamed) != total {
			t.Errorf("%s: streamed %d bytes, want %d (streaming is not capped)", name, len(streamed), total)
		}
	}
	check("stdout", res.Stdout, res.StdoutDropped, out.String(), "HEADxxx", "xxxTAIL", 100_008)
	check("stderr", res.Stderr, res.StderrDropped, errb.String(), "EHEADyyy", "yyyETAIL", 50_010)
	if !res.Truncated {
		t.Error("Truncated not set")
	}
}

// background: a process left running with stdout open does not hold Run.
func (s *suite) background(t *testing.T) {
	f := NewFixture(t, s.opt)
	m := Marker()
	res := s.script(t, f, "sleep "+m+" & echo done")
	wantExit(t, res, 0)
	if got := string(res.Stdout); got != "done\n" {
		t.Errorf("stdout %q", got)
	}
	if res.Duration > 10*time.Second {
		t.Errorf("Duration %v: Run waited for the background process", res.Duration)
	}
	s.opt.NoLeftovers(t, m)
}

func (s *suite) readOnlySession(t *testing.T) {
	f := NewFixture(t, s.opt)
	res := s.script(t, f, `R=$GATEBRIDGE_RESPONSES_DIR B=${PATH%%:*}
[ -f "$R/pre" ] && [ -f "$B/gb-hello" ] || { echo "session not visible"; exit 3; }
true > "$R/new" 2>/dev/null && echo "wrote responses/new"
rm -f "$R/pre" 2>/dev/null; [ -f "$R/pre" ] || echo "removed responses/pre"
mkdir "$R/d" 2>/dev/null && echo "made responses/d"
printf x >> "$R/pre" 2>/dev/null && echo "appended responses/pre"
true > "$B/new" 2>/dev/null && echo "wrote bin/new"
printf 'echo owned' > "$B/gb-hello" 2>/dev/null && echo "replaced bin/gb-hello"
chmod 777 "$B/gb-hello" 2>/dev/null && echo "chmod bin/gb-hello"
exit 0`)
	wantExit(t, res, 0)
	if len(bytes.TrimSpace(res.Stdout)) > 0 {
		t.Errorf("responses/ or bin/ writable inside:\n%s", res.Stdout)
	}
	if b, _ := os.ReadFile(filepath.Join(f.Session.Responses, "pre")); string(b) != "response-here\n" {
		t.Errorf("responses/pre on host is %q", b)
	}
}

func (s *suite) readOnlyWorkspace(t *testing.T) {
	f := NewFixture(t, s.opt)
	res := s.script(t, f, `true > ws-new 2>/dev/null && echo "wrote ws-new"
printf x >> ws-marker 2>/dev/null && echo "appended ws-marker"
exit 0`)
	wantExit(t, res, 0)
	if len(bytes.TrimSpace(res.Stdout)) > 0 {
		t.Errorf("workspace writable without WorkspaceWritable:\n%s", res.Stdout)
	}
}

// nestedProtected performs [NestedProtectedAttack] with the spec's
// protected paths.
func (s *suite) nestedProtected(t *testing.T) {
	f := NewFixture(t, s.opt)
	script, check := NestedProtectedAttack(t, f.Workspace)
	spec := f.Spec(script)
	spec.WorkspaceWritable = true
	spec.ProtectedPaths = NestedProtectedPaths
	check(t, s.run(t, context.Background(), spec))
}

// NestedProtectedPaths are the protected paths [NestedProtectedAttack]
// expects: two below existing parents (one and two levels down) and one
// whose parent is missing.
var NestedProtectedPaths = []string{"tools/hooks", "deep/er/hooks", "gen/hooks"}

// NestedProtectedAttack prepares the workspace ws (tools/hooks and
// deep/er/hooks, each holding pre-commit; gen missing) and returns the
// attack script, to run in ws with ws writable and [NestedProtectedPaths]
// protected, and the check of its result.
//
// The attack: a protected path below the top of the workspace is a
// read-only mount inside a writable directory. The command renames a
// parent (the mount moves with it), makes a new protected path where the
// old one was and writes a hook into it, which host tools would then run.
// It tries every parent, the workspace-level one and deeper ones, and the
// protected paths themselves. The check wants every rename and write
// refused, the protected directories untouched on the host, no hook
// anywhere in the workspace, gen/hooks gone after the run, and writes in
// the parents (gen made for the run included) still working.
func NestedProtectedAttack(t *testing.T, ws string) (script string, check func(*testing.T, *sandbox.Result)) {
	t.Helper()
	protected := []string{"tools/hooks", "deep/er/hooks"}
	for _, d := range []string{"tools", "tools/hooks", "deep", "deep/er", "deep/er/hooks"} {
		mkdir(t, filepath.Join(ws, d), 0o777)
	}
	before := map[string]os.FileInfo{}
	for _, d := range protected {
		write(t, filepath.Join(ws, d, "pre-commit"), "orig\n", 0o666)
		fi, err := os.Lstat(filepath.Join(ws, d))
		if err != nil {
			t.Fatal(err)
		}
		before[d] = fi
	}
	script = `for p in tools/hooks deep/er/hooks gen/hooks deep/er deep tools gen; do
  mv "$p" "$p.moved" 2>/dev/null && echo "moved $p"
done
for p in tools/hooks deep/er/hooks gen/hooks; do
  mkdir -p "$p" 2>/dev/null
  echo evil > "$p/pre-commit" 2>/dev/null && echo "wrote $p/pre-commit"
  echo evil > "$p/post-checkout" 2>/dev/null && echo "wrote $p/post-checkout"
done
echo ok > tools/new && echo ok > deep/new && echo ok > deep/er/new && echo ok > gen/new && echo writes-ok`
	check = func(t *testing.T, res *sandbox.Result) {
		t.Helper()
		if string(res.Stdout) != "writes-ok\n" {
			t.Errorf("stdout %q, want only writes-ok (stderr %q)", res.Stdout, res.Stderr)
		}
		for _, d := range protected {
			fi, err := os.Lstat(filepath.Join(ws, d))
			if err != nil || !os.SameFile(fi, before[d]) {
				t.Errorf("%s on the host is no longer the protected directory: %v", d, err)
				continue
			}
			ents, _ := os.ReadDir(filepath.Join(ws, d))
			if len(ents) != 1 || ents[0].Name() != "pre-commit" {
				t.Errorf("%s holds %v, want only pre-commit", d, ents)
			}
			if b, _ := os.ReadFile(filepath.Join(ws, d, "pre-commit")); string(b) != "orig\n" {
				t.Errorf("%s/pre-commit is %q", d, b)
			}
		}
		if _, err := os.Lstat(filepath.Join(ws, "gen", "hooks")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("gen/hooks is there after the run (%v): host tools would read it", err)
		}
		filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if b, _ := os.ReadFile(p); strings.Contains(string(b), "evil") {
					t.Errorf("the command planted %s", p)
				}
			}
			if err == nil && strings.HasSuffix(p, ".moved") {
				t.Errorf("the command renamed a parent of a protected path: %s", p)
			}
			return nil
		})
	}
	return script, check
}

func (s *suite) network(t *testing.T) {
	f := NewFixture(t, s.opt)
	res := s.script(t, f, "cat /proc/net/dev")
	wantExit(t, res, 0)
	var ifaces []string
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		if name, _, ok := strings.Cut(line, ":"); ok && !strings.Contains(name, "|") {
			ifaces = append(ifaces, strings.TrimSpace(name))
		}
	}
	if len(ifaces) != 1 || ifaces[0] != "lo" {
		t.Errorf("network interfaces inside: %q, want only lo", ifaces)
	}
}

func (s *suite) hostFiles(t *testing.T) {
	f := NewFixture(t, s.opt)
	if b, err := os.ReadFile(f.Secret); err != nil || string(b) != f.SecretText {
		t.Fatalf("secret not readable on the host: %v", err)
	}
	res := s.script(t, f, "cat '"+f.Secret+"' 2>/dev/null && exit 7; exit 0")
	wantExit(t, res, 0)
	if bytes.Contains(res.Stdout, []byte(f.SecretText)) {
		t.Errorf("host file %s readable inside", f.Secret)
	}
}

func (s *suite) capabilities(t *testing.T) {
	f := NewFixture(t, s.opt)
	res := s.script(t, f, "cat /proc/self/status")
	wantExit(t, res, 0)
	seen := 0
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		k, v, ok := strings.Cut(line, ":")
		switch k {
		case "CapEff", "CapPrm", "CapAmb":
			seen++
			if v = strings.TrimSpace(v); ok && strings.Trim(v, "0") != "" {
				t.Errorf("%s = %s inside, want 0", k, v)
			}
		}
	}
	if seen < 2 {
		t.Errorf("no capability lines in /proc/self/status:\n%s", res.Stdout)
	}
}

func (s *suite) hostProcesses(t *testing.T) {
	f := NewFixture(t, s.opt)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	res := s.script(t, f, fmt.Sprintf("cat /proc/%d/cmdline 2>/dev/null; exit 0", os.Getpid()))
	wantExit(t, res, 0)
	if bytes.Contains(res.Stdout, []byte(filepath.Base(exe))) {
		t.Errorf("host process %d (%s) visible inside", os.Getpid(), exe)
	}
}
