package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/sandbox"
)

// shBackend runs the command directly (a minimal local backend, so the
// bridge tests do not depend on package sandbox's backends).
type shBackend struct{}

func (shBackend) Name() string { return "test" }
func (shBackend) Run(ctx context.Context, spec *sandbox.Spec) (*sandbox.Result, error) {
	cmd := exec.CommandContext(ctx, spec.Command[0], spec.Command[1:]...)
	cmd.Env = sandbox.MergeEnv(os.Environ(), sandbox.SessionEnv(spec, spec.Session, os.Getenv("PATH")), spec.Env)
	cmd.Dir = spec.Workspace
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if spec.Stdout != nil {
		cmd.Stdout = io.MultiWriter(&so, spec.Stdout)
	}
	if spec.Stderr != nil {
		cmd.Stderr = io.MultiWriter(&se, spec.Stderr)
	}
	if spec.Stdin != nil {
		cmd.Stdin = spec.Stdin
	}
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		return nil, err
	}
	return &sandbox.Result{ExitCode: code, Stdout: so.Bytes(), Stderr: se.Bytes()}, nil
}

func echoGate(name string) gates.Gate {
	return gates.Func(gates.Spec{Name: name, Summary: "echo", Stdin: gates.StdinIfNoArgs},
		func(ctx context.Context, c *gates.Call) (int, error) {
			if len(c.Args) == 0 {
				c.Stdout.Write(c.Stdin)
				return 0, nil
			}
			fmt.Fprintln(c.Stdout, strings.Join(c.Args, " "))
			return 0, nil
		})
}

func testRegistry(t *testing.T) *gates.Registry {
	t.Helper()
	r := gates.NewRegistry()
	r.MustRegister(echoGate("t_echo"))
	r.MustRegister(gates.Func(gates.Spec{Name: "t_fail"}, func(ctx context.Context, c *gates.Call) (int, error) {
		return 0, errors.New("it broke")
	}))
	r.MustRegister(gates.Func(gates.Spec{Name: "t_panic"}, func(ctx context.Context, c *gates.Call) (int, error) {
		panic("boom")
	}))
	r.MustRegister(gates.Func(gates.Spec{Name: "t_code"}, func(ctx context.Context, c *gates.Call) (int, error) {
		var n int
		fmt.Sscan(c.Args[0], &n)
		return n, nil
	}))
	r.MustRegister(gates.Func(gates.Spec{Name: "t_hang", Timeout: 300 * time.Millisecond}, func(ctx context.Context, c *gates.Call) (int, error) {
		time.Sleep(1500 * time.Millisecond) // ignores ctx on purpose
		return 0, nil
	}))
	r.MustRegister(gates.Func(gates.Spec{Name: "t_slow", Timeout: 300 * time.Millisecond}, func(ctx context.Context, c *gates.Call) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	}))
	r.MustRegister(gates.Func(gates.Spec{Name: "t_big"}, func(ctx context.Context, c *gates.Call) (int, error) {
		c.Stdout.Write(bytes.Repeat([]byte("x"), 10000))
		return 0, nil
	}))
	r.MustRegister(gates.Func(gates.Spec{Name: "t_submit", Stdin: gates.StdinIfNoArgs}, func(ctx context.Context, c *gates.Call) (int, error) {
		a := strings.Join(c.Args, " ")
		if len(c.Args) == 0 {
			a = string(c.Stdin)
		}
		c.Results.SetResult(gates.ResultAnswer, a)
		return 0, nil
	}))
	return r
}

func run(t *testing.T, cfg Config, script string) *Result {
	t.Helper()
	if cfg.Gates == nil {
		cfg.Gates = testRegistry(t)
	}
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.LimitKey == nil {
		cfg.LimitKey = cliLimitKey
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Run(ctx, cfg, shBackend{}, sandbox.Spec{Command: []string{"sh", "-c", script}, Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(cfg.Dir)
	if len(ents) != 0 && !cfg.Keep {
		t.Errorf("session dir left behind: %v", ents)
	}
	return res
}

func TestEchoRoundTrip(t *testing.T) {
	for _, mode := range []WatchMode{WatchEvents, WatchPoll} {
		t.Run(string(mode), func(t *testing.T) {
			res := run(t, Config{Watch: mode}, `t_echo "a b" c; printf 'in\nput' | t_echo; echo rc=$?`)
			if want := "a b c\nin\nputrc=0\n"; res.Stdout != want {
				t.Fatalf("stdout %q want %q (stderr %q)", res.Stdout, want, res.Stderr)
			}
			if len(res.Calls) != 2 || res.Calls[0].Gate != "t_echo" || res.Calls[0].ExitCode != 0 {
				t.Fatalf("calls: %+v", res.Calls)
			}
		})
	}
}

func TestExitCodesAndErrors(t *testing.T) {
	res := run(t, Config{}, `t_fail; echo "fail=$?"; t_panic; echo "panic=$?"; t_code 42; echo "code=$?"; t_slow; echo "slow=$?"; t_hang; echo "hang=$?"`)
	want := "fail=1\npanic=1\ncode=42\nslow=124\nhang=124\n"
	if res.Stdout != want {
		t.Fatalf("stdout %q want %q", res.Stdout, want)
	}
	for _, w := range []string{"gatebridge: t_fail: it broke", "gatebridge: t_panic: panic: boom", "gatebridge: t_slow: timed out after 300ms"} {
		if !strings.Contains(res.Stderr, w) {
			t.Errorf("stderr %q lacks %q", res.Stderr, w)
		}
	}
}

func TestSubmitAnswer(t *testing.T) {
	res := run(t, Config{}, `printf 'a\nb\n' | t_submit`)
	if res.Answer == nil || *res.Answer != "a\nb\n" {
		t.Fatalf("answer %v", res.Answer)
	}
}

func TestBigOutputUsesCat(t *testing.T) {
	res := run(t, Config{}, `t_big | wc -c`)
	if strings.TrimSpace(res.Stdout) != "10000" {
		t.Fatalf("got %q", res.Stdout)
	}
}

func TestOutputCap(t *testing.T) {
	res := run(t, Config{Limits: Limits{MaxOutputBytes: 100}}, `t_big | wc -c`)
	if strings.TrimSpace(res.Stdout) != "100" || !strings.Contains(res.Stderr, "max_output_bytes") {
		t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
}

func TestParallelCallers(t *testing.T) {
	script := `for k in 1 2 3 4 5 6 7 8; do ( for j in $(seq 1 50); do o=$(t_echo "$k-$j"); [ "$o" = "$k-$j" ] || echo "BAD $k $j $o"; done ) & done; wait; echo finished`
	res := run(t, Config{}, script)
	if res.Stdout != "finished\n" {
		t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	if len(res.Calls) != 400 {
		t.Fatalf("%d calls recorded, want 400", len(res.Calls))
	}
}

func TestPlainV1Client(t *testing.T) {
	// A client that knows only the v1 layout: args/N, gate, stdin, ready;
	// polls for .exit and reads .stdout. No FIFO, no helpers.
	script := `set -e
d=$GATEBRIDGE_CALLS_DIR/plain1
mkdir -p "$d/args"
printf 'hello' > "$d/args/0"; printf 'world' > "$d/args/1"
printf 't_echo' > "$d/gate"
: > "$d/ready"
while [ ! -f "$GATEBRIDGE_RESPONSES_DIR/plain1.exit" ]; do sleep 0.01; done
cat "$GATEBRIDGE_RESPONSES_DIR/plain1.stdout"; echo "exit=$(cat "$GATEBRIDGE_RESPONSES_DIR/plain1.exit")"`
	res := run(t, Config{}, script)
	if res.Stdout != "hello world\nexit=0\n" {
		t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
}

func TestHostileCallEntries(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("TOPSECRET"), 0o644)
	script := `c=$GATEBRIDGE_CALLS_DIR; r=$GATEBRIDGE_RESPONSES_DIR
pub() { : > "$c/$1/ready"; while [ ! -f "$r/$1.exit" ]; do sleep 0.01; done; printf '%s exit=%s err=' "$1" "$(cat "$r/$1.exit")"; cat "$r/$1.stderr"; cat "$r/$1.stdout" 2>/dev/null; }
mkdir -p "$c/s1/args"; printf t_echo > "$c/s1/gate"; ln -s ` + secret + ` "$c/s1/args/0"; pub s1
mkdir -p "$c/s2/args"; ln -s ` + secret + ` "$c/s2/gate"; pub s2
mkdir -p "$c/f1/args"; printf t_echo > "$c/f1/gate"; mkfifo "$c/f1/args/0"; pub f1
mkdir -p "$c/f2/args"; printf t_echo > "$c/f2/gate"; mkfifo "$c/f2/stdin"; pub f2
mkdir -p "$c/b1/args"; printf t_echo > "$c/b1/gate"; head -c 2000000 /dev/zero | tr '\0' a > "$c/b1/args/0"; pub b1
mkdir -p "$c/u1/args"; printf 'no/such' > "$c/u1/gate"; pub u1
mkdir -p "$c/g1/args"; printf t_echo > "$c/g1/gate"; : > "$c/g1/args/5"; pub g1
mkdir -p "$c/h1/args"; printf t_echo > "$c/h1/gate"; ln ` + secret + ` "$c/h1/args/0" 2>/dev/null || printf x > "$c/h1/args/0"; pub h1
`
	res := run(t, Config{Limits: Limits{MaxArgBytes: 1 << 20}}, script)
	if strings.Contains(res.Stdout+res.Stderr, "TOPSECRET") {
		t.Fatalf("secret leaked: %q", res.Stdout)
	}
	for _, want := range []string{
		`s1 exit=126 err=gatebridge: call args/0 is a symbolic link (refused)`,
		`s2 exit=126 err=gatebridge: call gate is a symbolic link (refused)`,
		`f1 exit=126 err=gatebridge: call args/0 is not a regular file (refused)`,
		`f2 exit=126 err=gatebridge: call stdin is not a regular file (refused)`,
		`b1 exit=126 err=gatebridge: arguments exceed 1048576 bytes (limit set by bridge.limits.max_arg_bytes)`,
		`u1 exit=127 err=gatebridge: unknown gate "no/such"`,
		`g1 exit=2 err=gatebridge: call args: unexpected entry "5" (want files 0..0)`,
	} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("stdout lacks %q\n%s", want, res.Stdout)
		}
	}
}

func TestSymlinkCallDir(t *testing.T) {
	target := t.TempDir()
	os.MkdirAll(filepath.Join(target, "args"), 0o755)
	os.WriteFile(filepath.Join(target, "gate"), []byte("t_echo"), 0o644)
	os.WriteFile(filepath.Join(target, "ready"), nil, 0o644)
	res := run(t, Config{}, `ln -s `+target+` "$GATEBRIDGE_CALLS_DIR/sl"; while [ ! -f "$GATEBRIDGE_RESPONSES_DIR/sl.exit" ]; do sleep 0.01; done; cat "$GATEBRIDGE_RESPONSES_DIR/sl.stderr"`)
	if !strings.Contains(res.Stdout, "call sl is a symbolic link (refused)") {
		t.Fatalf("stdout %q", res.Stdout)
	}
	if _, err := os.Stat(filepath.Join(target, "ready")); err != nil {
		t.Fatalf("host touched the symlink target: %v", err)
	}
}

// cliLimitKey names a limit's setting as the CLI does (its config key):
// the messages these tests check are the CLI's.
func cliLimitKey(l string) string { return "bridge.limits." + l }

// TestLimitMessagesNameNoConfigKey: without Config.LimitKey, a message
// about a limit names the limit, not a key of the CLI's config (a layer
// above this one).
func TestLimitMessagesNameNoConfigKey(t *testing.T) {
	res := run(t, Config{Limits: Limits{MaxCalls: 1, MaxArgBytes: 4}, LimitKey: func(l string) string { return "<" + l + ">" }},
		`t_echo 123456; t_echo 1; t_echo 2`)
	for _, want := range []string{"arguments exceed 4 bytes (limit set by <max_arg_bytes>)", "session call limit reached (1 calls) (limit set by <max_calls>)"} {
		if !strings.Contains(res.Stderr, want) {
			t.Errorf("stderr %q, want %q", res.Stderr, want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Run(ctx, Config{Gates: testRegistry(t), Dir: t.TempDir(), Limits: Limits{MaxCalls: 1, MaxArgBytes: 4}}, shBackend{},
		sandbox.Spec{Command: []string{"sh", "-c", `t_echo 123456; t_echo 1; t_echo 2`}, Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"arguments exceed 4 bytes (limit max_arg_bytes)", "session call limit reached (1 calls) (limit max_calls)"} {
		if !strings.Contains(res.Stderr, want) {
			t.Errorf("without LimitKey: stderr %q, want %q", res.Stderr, want)
		}
	}
	if strings.Contains(res.Stderr, "bridge.limits") {
		t.Errorf("without LimitKey, a config key: %q", res.Stderr)
	}
}

func TestCallLimit(t *testing.T) {
	res := run(t, Config{Limits: Limits{MaxCalls: 3}}, `for i in 1 2 3 4 5; do t_echo $i; echo "rc=$?"; done`)
	// Exactly max_calls calls run; every later one is refused.
	if want := "1\nrc=0\n2\nrc=0\n3\nrc=0\nrc=126\nrc=126\n"; res.Stdout != want {
		t.Fatalf("stdout %q, want %q", res.Stdout, want)
	}
	if !strings.Contains(res.Stderr, "bridge.limits.max_calls") {
		t.Fatalf("stderr %q", res.Stderr)
	}
}

func TestKeepSession(t *testing.T) {
	dir := t.TempDir()
	res := run(t, Config{Dir: dir, Keep: true}, `t_echo hi`)
	if res.SessionDir == "" {
		t.Fatal("no session dir in result")
	}
	if _, err := os.Stat(filepath.Join(res.SessionDir, "bin", "t_echo")); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(res.SessionDir)
}

func TestOneWatcherManySessions(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := Config{Gates: testRegistry(t), Dir: t.TempDir()}
			res, err := Run(context.Background(), cfg, shBackend{}, sandbox.Spec{Command: []string{"sh", "-c", fmt.Sprintf("t_echo s%d", i)}})
			if err != nil {
				errs <- err
				return
			}
			if res.Stdout != fmt.Sprintf("s%d\n", i) {
				errs <- fmt.Errorf("session %d: %q", i, res.Stdout)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	theHub.mu.Lock()
	open := theHub.w != nil
	theHub.mu.Unlock()
	if open {
		t.Error("watcher still open after every session closed")
	}
	theHub.closing.Wait() // the background close finishes
}

var _ = syscall.SIGTERM

// A call dir swapped for a symlink after the host opened it must not make
// the host watch (or read) the link's target; the fd-based watch pins the
// directory that was opened. And no watch fd may outlive the session.
func TestWatchPinsOpenedDirAndReleasesFds(t *testing.T) {
	before := countFds(t)
	outside := t.TempDir()
	res := run(t, Config{}, `c=$GATEBRIDGE_CALLS_DIR
mkdir "$c/swap"; sleep 0.2
mv "$c/swap" "$c/swap.old"; ln -s `+outside+` "$c/swap"
t_echo after-swap
mkdir "$c/never-ready"`)
	if res.Stdout != "after-swap\n" {
		t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	theHub.mu.Lock()
	n := len(theHub.calls)
	theHub.mu.Unlock()
	if n != 0 {
		t.Errorf("%d call watches left after the session closed", n)
	}
	if after := countFds(t); after > before {
		t.Errorf("fds: %d before, %d after the session", before, after)
	}
}

func countFds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

// The host's heartbeat keeps a waiting bash/busybox wrapper from giving up
// while its call is still queued or running: GATEBRIDGE_WAIT_TIMEOUT
// measures the host's silence, not the call's duration.
func TestHeartbeatOutlastsWaitTimeout(t *testing.T) {
	for _, sh := range []string{"bash", "busybox sh"} {
		if _, err := exec.LookPath(strings.Fields(sh)[0]); err != nil {
			t.Logf("skip %s: not installed", sh)
			continue
		}
		t.Run(sh, func(t *testing.T) {
			reg := testRegistry(t)
			reg.MustRegister(gates.Func(gates.Spec{Name: "t_nap", Timeout: 10 * time.Second},
				func(ctx context.Context, c *gates.Call) (int, error) {
					select {
					case <-time.After(2500 * time.Millisecond):
					case <-ctx.Done():
						return 0, ctx.Err()
					}
					fmt.Fprintln(c.Stdout, "rested")
					return 0, nil
				}))
			res := run(t, Config{Gates: reg, RescanInterval: 200 * time.Millisecond},
				`GATEBRIDGE_WAIT_TIMEOUT=1 `+sh+` "$(command -v t_nap)"; echo "rc=$?"`)
			if res.Stdout != "rested\nrc=0\n" {
				t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
			}
		})
	}
}

// An invalid call name is removed again by later scans: the command can
// keep one alive by adding entries while the host removes it (CI saw
// ".hidden" left after mkdir raced the removal), and here it plants one
// with more entries than one removal may take (64).
func TestInvalidIDRemovedAgain(t *testing.T) {
	res := run(t, Config{RescanInterval: 50 * time.Millisecond}, `c=$GATEBRIDGE_CALLS_DIR
mkdir "$c/stage" && (cd "$c/stage" && touch $(seq 200)) && mv "$c/stage" "$c/.x"
i=0; while [ -e "$c/.x" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
echo "left=$(ls -A "$c" | tr '\n' ' ')"`)
	if res.Stdout != "left=\n" {
		t.Fatalf("stdout %q (want calls/ empty)", res.Stdout)
	}
	n := 0
	for _, c := range res.Calls {
		if c.ID == `".x"` {
			n++
		}
	}
	if n != 1 {
		t.Errorf(`".x" recorded %d times, want once: %+v`, n, res.Calls)
	}
}

// Without /proc/self/fd (kqueue systems: macOS, BSD) a call directory is
// watched by its path; the ready marker must still raise an event, not
// wait for the rescan (set to an hour here).
func TestWatchCallDirByPath(t *testing.T) {
	if !procFD {
		t.Skip("no /proc/self/fd: the path watch is the only one (TestEchoRoundTrip covers it)")
	}
	procFD = false
	defer func() { procFD = true }()
	res := run(t, Config{RescanInterval: time.Hour}, `t_echo a; t_echo b; sleep 0.2; t_echo c`)
	if res.Stdout != "a\nb\nc\n" {
		t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
}

// After the first call of a run, calls claim slots the host prepared: with
// a PATH holding nothing but the gates (no mkdir, mkfifo, cat or sleep), a
// text-output call still works, so it starts no process besides the
// wrapper itself.
func TestSlotCallsStartNoProcess(t *testing.T) {
	res := run(t, Config{}, `t_echo first
PATH=$GATEBRIDGE_SESSION_DIR/bin
i=0; while [ $i -lt 30 ]; do t_echo "n$i" > /dev/null || { echo "call $i failed"; exit 1; }; i=$((i+1)); done
t_echo last`)
	if res.Stdout != "first\nlast\n" || res.ExitCode != 0 {
		t.Fatalf("stdout %q stderr %q exit %d", res.Stdout, res.Stderr, res.ExitCode)
	}
	slots := 0
	for _, c := range res.Calls {
		if strings.HasPrefix(c.ID, mailbox.SlotPrefix) {
			slots++
		}
	}
	if slots != 31 {
		t.Errorf("%d of %d calls used a slot, want all but the first", slots, len(res.Calls))
	}
}

// Parallel callers race for slots: each slot is claimed once (O_EXCL), the
// losers take the next one or make a directory, and every answer reaches
// its own caller.
func TestSlotsUnderParallelCallers(t *testing.T) {
	res := run(t, Config{}, `t_echo warm > /dev/null
for k in 1 2 3 4 5 6 7 8 9 10 11 12; do
	( i=0; while [ $i -lt 15 ]; do o=$(t_echo "c$k-$i") && [ "$o" = "c$k-$i" ] || echo "bad c$k-$i: $o"; i=$((i+1)); done ) &
done
wait; echo done`)
	if res.Stdout != "done\n" {
		t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	ids := map[string]bool{}
	slots := 0
	for _, c := range res.Calls {
		if ids[c.ID] {
			t.Errorf("id %s answered twice", c.ID)
		}
		ids[c.ID] = true
		if strings.HasPrefix(c.ID, mailbox.SlotPrefix) {
			slots++
		}
	}
	t.Logf("%d of %d calls used a slot", slots, len(res.Calls))
	if len(res.Calls) != 181 || slots == 0 {
		t.Errorf("%d calls, %d in slots", len(res.Calls), slots)
	}
}

// A sandbox that squats on slot names, or claims slots without ever
// publishing a call, only slows its own calls: the host skips taken names
// and makes at most max_calls slots in a session.
func TestSlotsHostile(t *testing.T) {
	const maxCalls = 12
	res := run(t, Config{Limits: Limits{MaxCalls: maxCalls}}, `c=$GATEBRIDGE_CALLS_DIR
for n in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do mkdir "$c/_$n"; done
t_echo a
r=0; while [ $r -lt 8 ]; do
	for s in "$c"/_*; do { printf "" > "$s/argv"; } 2>/dev/null; done
	t_echo "r$r" > /dev/null || echo "r$r failed"
	r=$((r+1))
done
t_echo b
echo "slots=$(ls -d "$c"/_* | wc -l)"`)
	if !strings.HasPrefix(res.Stdout, "a\nb\nslots=") {
		t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	var n int
	fmt.Sscanf(strings.TrimPrefix(res.Stdout, "a\nb\nslots="), "%d", &n)
	if n > 16+maxCalls {
		t.Errorf("%d slot entries: the host made more than max_calls (%d) slots", n, maxCalls)
	}
}

// Slot names planted as symlinks to a host directory are skipped: the host
// builds a slot where the sandbox cannot write and moves it in without
// replacing anything, so it never writes through the link.
func TestSlotNamesPlantedAsLinks(t *testing.T) {
	target := t.TempDir()
	res := run(t, Config{}, `c=$GATEBRIDGE_CALLS_DIR
for n in 1 2 3 4 5 6 7 8 9 10; do ln -s `+target+` "$c/_$n"; done
t_echo a; t_echo b; t_echo c`)
	if res.Stdout != "a\nb\nc\n" {
		t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	if ents, _ := os.ReadDir(target); len(ents) != 0 {
		t.Errorf("the host wrote into the linked directory: %v", ents)
	}
	slots := 0
	for _, c := range res.Calls {
		if strings.HasPrefix(c.ID, mailbox.SlotPrefix) {
			slots++
		}
	}
	if slots == 0 {
		t.Errorf("no call used a slot past the planted names: %+v", res.Calls)
	}
}
