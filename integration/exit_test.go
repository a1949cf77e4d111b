package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// exitGatesConfig has command gates (they run on the host) for exit codes.
const exitGatesConfig = `
gates:
  commands:
    - name: fail42
      command: [sh, -c, 'echo out; echo err >&2; exit 42', x]
    - name: slow
      command: [sleep, "5"]
      timeout: 300ms
`

var timeoutSource = regexp.MustCompile(`(?m)(timed out after \S+) \(.*\)$`)

// TestExitCodes checks each exit code a wrapper returns, with its message,
// in one sandbox run per backend.
func TestExitCodes(t *testing.T) {
	secret := filepath.Join(workspace(t), "secret")
	if err := os.WriteFile(secret, []byte("TOP-SECRET-EXIT\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := plainClient + `
rc() { "$@" > "$TMPDIR/out" 2> "$TMPDIR/err"; c=$?; printf '%s|%s|%s\n' "$c" "$(cat "$TMPDIR/out")" "$(cat "$TMPDIR/err")"; }
rc gb_echo x
rc read_file missing.txt
rc read_file --bogus x
rc fail42
rc slow
rc read_file ../../etc/passwd
rc read_file /etc/passwd
rc read_file escape
rc read_file sub/escape-dir/secret
v1call no_such_gate a
`
	want := strings.Join([]string{
		"0|x|",
		`1||gatebridge: read_file: stat "missing.txt": no such file or directory`,
		`2||gatebridge: read_file: unknown option "--bogus" (usage: read_file [--offset N] [--limit N] PATH)`,
		"42|out|err",
		"124||gatebridge: slow: timed out after 300ms",
		`126||gatebridge: read_file: "../../etc/passwd" is outside the workspace`,
		`126||gatebridge: read_file: "/etc/passwd" is outside the workspace`,
		`126||gatebridge: read_file: "escape" is outside the workspace`,
		`126||gatebridge: read_file: "sub/escape-dir/secret" is outside the workspace`,
		"exit=127",
		"[out][/out]",
		`[err]gatebridge: unknown gate "no_such_gate"`,
		"[/err]",
		"",
	}, "\n")
	forEachBackend(t, func(t *testing.T, backend string) {
		ws := workspace(t)
		os.Mkdir(filepath.Join(ws, "sub"), 0o755)
		if err := os.Symlink(secret, filepath.Join(ws, "escape")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Dir(secret), filepath.Join(ws, "sub", "escape-dir")); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		out := gb(t, backend, Run{Dir: ws, Config: exitGatesConfig, Command: []string{"sh", "-c", script}})
		if d := time.Since(start); d > 4*time.Second {
			t.Errorf("run took %v: the 300ms gate timeout did not stop sleep 5", d)
		}
		if out.Code != 0 || out.Stderr != "" {
			t.Errorf("exit %d, stderr %q", out.Code, out.Stderr)
		}
		// The gate timeout message may name where the limit came from.
		got := timeoutSource.ReplaceAllString(out.Stdout, "$1")
		if got != want {
			t.Errorf("got:\n%s\nwant:\n%s", out.Stdout, want)
		}
		if strings.Contains(out.Stdout+out.Stderr, "TOP-SECRET") {
			t.Errorf("secret leaked")
		}
	})
}

// TestExitCodePropagation checks that the command's own exit code is
// gatebridge's, including a gate's code under set -e.
func TestExitCodePropagation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		for _, tc := range []struct {
			script string
			code   int
		}{
			{"exit 0", 0},
			{"exit 3", 3},
			{"fail42", 42},
			{"gb_echo hi >/dev/null; read_file nope 2>/dev/null", 1},
		} {
			if backend == "docker" && tc.code == 0 {
				continue // covered by every other docker run; save a container
			}
			out := gb(t, backend, Run{Config: exitGatesConfig, Command: []string{"sh", "-c", tc.script}})
			if out.Code != tc.code {
				t.Errorf("%q: exit %d, want %d (stderr %q)", tc.script, out.Code, tc.code, out.Stderr)
			}
		}
	})
}

// TestExitCommandTimeout checks --timeout: exit 124, timed_out in --json,
// the command stopped well before it would have ended, no session left.
func TestExitCommandTimeout(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		sessions := workspace(t)
		marker := fmt.Sprint(30000 + rand.IntN(1000000)) // sleep's argv, to find it
		start := time.Now()
		res, out := gbJSON(t, backend, Run{
			Args:    []string{"--timeout", "1s"},
			Config:  "bridge:\n  session_dir: " + sessions + "\n",
			Command: []string{"sh", "-c", "echo started; sleep " + marker + "; echo not reached"},
		})
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("took %v", d)
		}
		if out.Code != 124 || res.ExitCode != 124 || !res.TimedOut {
			t.Errorf("exit %d, json exit_code %d, timed_out %v; want 124, 124, true (stderr %q)", out.Code, res.ExitCode, res.TimedOut, out.Stderr)
		}
		if res.Stdout != "started\n" {
			t.Errorf("stdout %q", res.Stdout)
		}
		assertEmptyDir(t, sessions)
		if len(sleepPids(marker)) > 0 {
			t.Errorf("sleep %s still runs after the timeout", marker)
		}
	})
}

// assertEmptyDir fails when dir has entries left (a session not removed).
func assertEmptyDir(t testing.TB, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left behind in %s: %s", dir, e.Name())
	}
}
