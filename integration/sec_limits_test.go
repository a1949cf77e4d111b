package integration

import (
	"encoding/json"
	"fmt"
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
)

// TestSecRunTimeoutBoundsGates: run --timeout 1s with a command gate that
// sleeps 12 s took 12 s. The gates of a timed-out run are cancelled, so
// run returns within timeout + kill_grace + 1 s, and --json records the
// cancelled call.
func TestSecRunTimeoutBoundsGates(t *testing.T) {
	cfg := `
sandbox:
  kill_grace: 500ms
gates:
  commands:
    - name: slowgate
      command: [sleep, "12"]
      timeout: 1m
`
	forEachBackend(t, func(t *testing.T, backend string) {
		start := time.Now()
		res, out := gbJSON(t, backend, Run{Config: cfg, Args: []string{"--timeout", "1s"}, Command: []string{"sh", "-c", "slowgate"}})
		took := time.Since(start)
		if took > 1*time.Second+500*time.Millisecond+time.Second+time.Second { // + process start and docker's own setup
			t.Errorf("run took %v", took)
		}
		if !res.TimedOut || out.Code != 124 {
			t.Errorf("timed_out %v, exit %d, stderr %q", res.TimedOut, out.Code, out.Stderr)
		}
		found := false
		for _, c := range res.Calls {
			found = found || (c.Gate == "slowgate" && c.Decision == "canceled" && c.ExitCode == 124)
		}
		if !found {
			t.Errorf("the cancelled call is not in calls[]: %+v", res.Calls)
		}
		if !sandboxtest.Poll(time.Second, func() bool { return len(sleepPids("12")) == 0 }) {
			t.Errorf("the command gate's sleep 12 still runs on the host")
		}
	})
}

// TestFloodMemory: 100,000 hostile calls with 64 × 256-byte arguments drove
// gatebridge to 6.8 GiB RSS and 1.6 GB of --json. Records are capped
// (max_records, max_record_bytes). make test runs 300 calls and checks the
// caps; GATEBRIDGE_FLOOD_BENCH=20000 measures the benchmark:
//
//	GATEBRIDGE_FLOOD_BENCH=20000 go test ./integration -run TestFloodMemory -v
func TestFloodMemory(t *testing.T) {
	n := 300
	if v := os.Getenv("GATEBRIDGE_FLOOD_BENCH"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	needBackend(t, "local")
	script := advPrelude + fmt.Sprintf(`
mkdir "$T/args"; a=$(head -c 256 /dev/zero | tr '\0' a)
i=0; while [ $i -lt 64 ]; do printf '%%s' "$a" > "$T/args/$i"; i=$((i+1)); done
cd "$C"
i=0; while [ $i -lt %d ]; do i=$((i+1)); mkdir f$i; cp -r "$T/args" f$i/args; printf gb_echo > f$i/gate; : > f$i/ready; done
k=0; while [ "$(ls "$C" | grep -cv "^_[0-9]*$")" -gt 0 ] && [ $k -lt 3000 ]; do k=$((k+1)); sleep 0.1; done
echo "left|$(ls "$C" | grep -cv "^_[0-9]*$")"
`, n)
	start := time.Now()
	out, peakKB := gbPeak(t, "local", Run{Args: []string{"--json"}, Command: []string{"sh", "-c", script}, Timeout: 10 * time.Minute})
	var res JSONResult
	if err := json.Unmarshal([]byte(out.Stdout), &res); err != nil {
		t.Fatalf("bad JSON: %v; stderr %s", err, out.Stderr)
	}
	t.Logf("%d calls of 64×256-byte args in %v: peak RSS %.1f MB, --json %.2f MB, %d records + %d omitted",
		n, time.Since(start).Round(time.Millisecond), float64(peakKB)/1024, float64(len(out.Stdout))/(1<<20), len(res.Calls), res.CallsOmitted)
	if len(res.Calls) != min(n, 1000) || len(res.Calls)+res.CallsOmitted < n {
		t.Errorf("records %d + omitted %d, want %d", len(res.Calls), res.CallsOmitted, n)
	}
	for _, c := range res.Calls {
		if b := len(strings.Join(c.Args, "")); b > 4096+200 {
			t.Fatalf("a record keeps %d argument bytes (max_record_bytes 4096)", b)
		}
	}
	if peakKB > 150*1024 {
		t.Errorf("peak RSS %d kB > 150 MB", peakKB)
	}
	if len(out.Stdout) > 20<<20 {
		t.Errorf("--json is %d bytes > 20 MB", len(out.Stdout))
	}
}

// TestSecSearchTimeout: a pathological search over a 4 MiB one-line file
// returns 124 at its gate timeout, and a pattern too large to run in
// bounded time is refused with exit 2.
func TestSecSearchTimeout(t *testing.T) {
	ws := workspace(t)
	must(t, os.WriteFile(filepath.Join(ws, "big"), []byte(strings.Repeat("a", 4<<20)), 0o644))
	cfg := "bridge:\n  limits:\n    gate_timeout: 1s\ngates:\n  max_search_file_bytes: 8388608\n"
	start := time.Now()
	out := gb(t, "local", Run{Dir: ws, Config: cfg, Command: []string{"sh", "-c",
		`search '[ab]{500}c' big; echo "slow $?"; search '(a|b|c|d|aa|bb|cc|dd){1000}Q' big; echo "huge $?"`}})
	took := time.Since(start)
	if !strings.Contains(out.Stdout, "slow 124\n") || !strings.Contains(out.Stdout, "huge 2\n") || !strings.Contains(out.Stderr, "pattern too complex") {
		t.Errorf("stdout %q stderr %q", out.Stdout, out.Stderr)
	}
	if took > 3*time.Second {
		t.Errorf("took %v with a 1s gate timeout", took)
	}
}

// TestSecCrashLeavesNothing: after kill -9 of gatebridge run, the command
// kept running (local, docker) and the session stayed in /dev/shm. Now the
// command dies with gatebridge (process group and parent-death signal for
// local and bwrap, a lease FIFO for docker), and `gatebridge prune` (like
// every start) removes the session and the container it left.
func TestSecCrashLeavesNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		sessions := workspace(t)
		cfg := filepath.Join(t.TempDir(), "gatebridge.yaml")
		must(t, os.WriteFile(cfg, []byte("bridge:\n  session_dir: "+sessions+"\n"), 0o644))
		marker := fmt.Sprintf("%d", 5000+rand.IntN(1000000))
		cmd := exec.Command(binary, "--config", cfg, "run", "--sandbox", backend, "--", "sh", "-c", "gb_echo up >/dev/null; sleep "+marker)
		cmd.Dir = workspace(t)
		must(t, cmd.Start())
		if !sandboxtest.Poll(30*time.Second, func() bool { return len(sleepPids(marker)) > 0 }) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("the command did not start")
		}
		must(t, cmd.Process.Signal(syscall.SIGKILL))
		cmd.Wait()
		if !sandboxtest.Poll(15*time.Second, func() bool { return len(sleepPids(marker)) == 0 }) {
			t.Errorf("sleep %s still runs 15s after gatebridge was killed", marker)
		}
		left, _ := filepath.Glob(filepath.Join(sessions, "gb-*"))
		if len(left) == 0 {
			t.Fatalf("no session left behind to prune (the test needs one)")
		}
		out := gbRaw(t, workspace(t), nil, nil, 0, "--config", cfg, "prune")
		if out.Code != 0 || !strings.Contains(out.Stdout, sessions) {
			t.Errorf("prune: exit %d, stdout %q, stderr %q", out.Code, out.Stdout, out.Stderr)
		}
		if left, _ := filepath.Glob(filepath.Join(sessions, "*")); len(left) != 0 {
			t.Errorf("left after prune: %v", left)
		}
		if backend == "docker" {
			ps := dockerCLI(t, "ps", "-aq", "--filter", "label=io.gatebridge.owner=gatebridge",
				"--filter", fmt.Sprintf("label=io.gatebridge.pid=%d", cmd.Process.Pid))
			if ps != "" {
				t.Errorf("containers left after prune: %s", ps)
			}
		}
	})
}

// TestSecUnreadableSessionRemoved: a command running as a non-root user
// makes a directory in its session 000; the session is still removed.
func TestSecUnreadableSessionRemoved(t *testing.T) {
	needRoot(t)
	sessions := workspace(t)
	os.Chmod(sessions, 0o777)
	ws := workspace(t)
	cfg := filepath.Join(t.TempDir(), "gatebridge.yaml")
	must(t, os.WriteFile(cfg, []byte("bridge:\n  session_dir: "+sessions+"\nsandbox:\n  backend: local\n"), 0o644))
	os.Chmod(filepath.Dir(cfg), 0o755)
	c := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", binary, "--config", cfg, "run", "--",
		"sh", "-c", `mkdir -p "$GATEBRIDGE_CALLS_DIR/x/y/z" && touch "$GATEBRIDGE_CALLS_DIR/x/y/f" && chmod 000 "$GATEBRIDGE_CALLS_DIR/x/y" "$GATEBRIDGE_CALLS_DIR/x" && echo made`)
	c.Dir = ws
	b, err := c.CombinedOutput()
	if err != nil || !strings.Contains(string(b), "made") {
		t.Fatalf("%v: %s", err, b)
	}
	if left, _ := filepath.Glob(filepath.Join(sessions, "*")); len(left) != 0 {
		t.Errorf("left behind: %v (%s)", left, b)
	}
}

// TestSecAuditBounded: a flood of calls cannot grow the audit log past
// (max_files+1) × max_bytes.
func TestSecAuditBounded(t *testing.T) {
	dir := t.TempDir()
	audit := filepath.Join(dir, "audit.jsonl")
	cfg := fmt.Sprintf("audit:\n  path: %s\n  max_bytes: 20000\n  max_files: 2\n", audit)
	out := gb(t, "local", Run{Config: cfg, Command: []string{"sh", "-c", `i=0; while [ $i -lt 300 ]; do gb_echo "$i" >/dev/null; i=$((i+1)); done; echo done`}})
	if out.Stdout != "done\n" {
		t.Fatalf("stdout %q stderr %q", out.Stdout, out.Stderr)
	}
	files, _ := filepath.Glob(audit + "*")
	var total int64
	for _, f := range files {
		fi, _ := os.Stat(f)
		total += fi.Size()
		if fi.Size() > 20000 {
			t.Errorf("%s is %d bytes > max_bytes", f, fi.Size())
		}
	}
	if len(files) != 3 || total > 60000 {
		t.Errorf("%d files, %d bytes: %v", len(files), total, files)
	}
}

// TestSecBwrapLimits: under bwrap 3000 background processes started and a
// 3 GiB allocation succeeded. With sandbox.limits a fork bomb and a memory
// bomb are stopped, the command's stderr says which limit, and nothing is
// left on the host.
func TestSecBwrapLimits(t *testing.T) {
	needRoot(t)
	needBackend(t, "bwrap")
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 for the memory bomb")
	}
	cfg := "sandbox:\n  limits:\n    pids: 32\n    memory: 67108864\n"
	marker := fmt.Sprintf("7.%d", rand.IntN(1000000))
	out := gb(t, "bwrap", Run{Config: cfg, Command: []string{"sh", "-c",
		`i=0; while [ $i -lt 200 ]; do sleep ` + marker + ` 2>/dev/null & i=$((i+1)); done; echo "started $(jobs -p | wc -l)"; kill $(jobs -p) 2>/dev/null; exit 0`}})
	if !strings.Contains(out.Stderr, "hit the process limit (sandbox.limits.pids=32") {
		t.Errorf("fork bomb: stdout %q stderr %q", out.Stdout, out.Stderr)
	}
	if n := len(sleepPids(marker)); n > 0 {
		t.Errorf("%d sleeps left on the host", n)
	}
	out = gb(t, "bwrap", Run{Config: cfg, Command: []string{"python3", "-c", "b = bytearray(512 << 20); print(len(b))"}})
	if out.Code == 0 || !strings.Contains(out.Stderr, "killed by the memory limit (sandbox.limits.memory=67108864") {
		t.Errorf("memory bomb: exit %d, stdout %q, stderr %q", out.Code, out.Stdout, out.Stderr)
	}
}
