//go:build unix

package gates

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func mustCommand(t *testing.T, s CommandSpec) Gate {
	t.Helper()
	g, err := NewCommand(s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestNewCommandValidation(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	writeFile(t, file, "")
	ok := CommandSpec{Name: "say", Command: []string{"echo"}}
	for _, tc := range []struct {
		name string
		edit func(*CommandSpec)
		err  string
	}{
		{"empty name", func(s *CommandSpec) { s.Name = "" }, "name: invalid gate name"},
		{"bad name", func(s *CommandSpec) { s.Name = "a/b" }, "name: invalid gate name"},
		{"reserved name", func(s *CommandSpec) { s.Name = "cat" }, "name: invalid gate name"},
		{"no command", func(s *CommandSpec) { s.Command = nil }, "command: empty"},
		{"empty command", func(s *CommandSpec) { s.Command = []string{""} }, "command: empty"},
		{"missing command", func(s *CommandSpec) { s.Command = []string{"gb-no-such-tool"} }, "command: exec"},
		{"nul in command", func(s *CommandSpec) { s.Command = []string{"echo", "a\x00"} }, "command: element 1"},
		{"empty allowed arg", func(s *CommandSpec) { s.AllowArgs = []string{"ok", ""} }, "allow_args: element 1"},
		{"bad pattern", func(s *CommandSpec) { s.AllowPattern = "(" }, "allow_pattern: error parsing regexp"},
		{"missing dir", func(s *CommandSpec) { s.Dir = "/nonexistent-gb" }, "dir:"},
		{"dir is a file", func(s *CommandSpec) { s.Dir = file }, "dir: " + strconv.Quote(file) + " is not a directory"},
		{"negative timeout", func(s *CommandSpec) { s.Timeout = -1 }, "timeout: negative"},
		{"negative output", func(s *CommandSpec) { s.MaxOutputBytes = -1 }, "max_output_bytes: negative"},
		{"bad env", func(s *CommandSpec) { s.Env = []string{"NOEQUALS"} }, "env: element 0"},
		{"empty env key", func(s *CommandSpec) { s.Env = []string{"=x"} }, "env: element 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ok
			tc.edit(&s)
			_, err := NewCommand(s)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want %q", err, tc.err)
			}
		})
	}
	if _, err := NewCommand(ok); err != nil {
		t.Errorf("valid spec: %v", err)
	}
}

func TestCommandPolicy(t *testing.T) {
	list := mustCommand(t, CommandSpec{Name: "say", Command: []string{"echo"}, AllowArgs: []string{"hello", "bye"}})
	pat := mustCommand(t, CommandSpec{Name: "lower", Command: []string{"echo"}, AllowPattern: "[a-z]+"})
	fixed := mustCommand(t, CommandSpec{Name: "fixed", Command: []string{"echo", "fixed"}})
	both := mustCommand(t, CommandSpec{Name: "both", Command: []string{"echo"}, AllowArgs: []string{"X"}, AllowPattern: "a*"})
	// No shell: metacharacters are plain argv bytes.
	raw := mustCommand(t, CommandSpec{Name: "raw", Command: []string{"printf", "%s|"}, AllowPattern: "(?s).*"})
	for _, tc := range []struct {
		g Gate
		gateCase
	}{
		{list, gateCase{name: "allowed", args: []string{"hello", "world"}, out: "hello world\n"}},
		{list, gateCase{name: "later args unchecked", args: []string{"bye", "--anything"}, out: "bye --anything\n"}},
		{list, gateCase{name: "refused", args: []string{"rm", "-rf"}, code: ExitDenied, out: "", err: `say: first argument "rm" is not allowed; allowed: one of hello, bye`}},
		{list, gateCase{name: "missing", code: ExitDenied, out: "", err: "say: missing first argument; allowed: one of hello, bye"}},
		{list, gateCase{name: "prefix is not enough", args: []string{"hellox"}, code: ExitDenied, out: "", err: "not allowed"}},
		{pat, gateCase{name: "pattern", args: []string{"abc"}, out: "abc\n"}},
		{pat, gateCase{name: "pattern anchored", args: []string{"abc;"}, code: ExitDenied, out: "", err: "matching the RE2 expression ^(?:[a-z]+)$"}},
		{pat, gateCase{name: "pattern case", args: []string{"ABC"}, code: ExitDenied, out: "", err: "not allowed"}},
		{fixed, gateCase{name: "fixed", out: "fixed\n"}},
		{fixed, gateCase{name: "fixed takes no args", args: []string{"x"}, code: ExitDenied, out: "", err: "fixed: takes no arguments"}},
		{both, gateCase{name: "both list", args: []string{"X"}, out: "X\n"}},
		{both, gateCase{name: "both pattern", args: []string{"aa"}, out: "aa\n"}},
		{both, gateCase{name: "pattern allows no args", out: "\n"}},
		{raw, gateCase{name: "no shell", args: []string{"$(id)", "a;b", "`x`", "*", "\n"}, out: "$(id)|a;b|`x`|*|\n|"}},
		{raw, gateCase{name: "nul", args: []string{"a\x00"}, code: ExitUsage, out: "", err: "NUL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			callGate(t, tc.g, tc.stdin, tc.args...).check(t, tc.code, tc.out, tc.err)
		})
	}
}

func TestCommandSpec(t *testing.T) {
	g := mustCommand(t, CommandSpec{Name: "git_ro", Command: []string{"echo", "git"}, AllowArgs: []string{"log", "diff"},
		Timeout: 3 * time.Second, Stdin: true})
	s := g.Spec()
	if s.Name != "git_ro" || s.Timeout != 3*time.Second || s.Stdin != StdinAlways {
		t.Errorf("spec %+v", s)
	}
	if s.Usage != "git_ro {log|diff} [ARGS...]" {
		t.Errorf("usage %q", s.Usage)
	}
	if s.Summary != "Run `echo git` on the host." {
		t.Errorf("summary %q", s.Summary)
	}
	if len(s.Params) != 2 || !s.Params[0].Required || !s.Params[1].Variadic {
		t.Errorf("params %+v", s.Params)
	}
}

func TestCommandExitCodes(t *testing.T) {
	exit42 := mustCommand(t, CommandSpec{Name: "exit42", Command: []string{"sh", "-c", "echo out; echo err >&2; exit 42"}})
	r := callGate(t, exit42, nil)
	r.check(t, 42, "out\n", "")
	if r.errOut != "err\n" {
		t.Errorf("stderr %q", r.errOut)
	}
	killed := mustCommand(t, CommandSpec{Name: "killed", Command: []string{"sh", "-c", "kill -9 $$"}})
	callGate(t, killed, nil).check(t, 128+9, "", "")
}

func TestCommandStdinAndEnv(t *testing.T) {
	t.Setenv("GB_HOST_SECRET", "leak")
	dir := t.TempDir()
	withStdin := mustCommand(t, CommandSpec{Name: "c", Command: []string{"cat"}, Stdin: true})
	noStdin := mustCommand(t, CommandSpec{Name: "c", Command: []string{"cat"}})
	env := mustCommand(t, CommandSpec{Name: "e", Command: []string{"sh", "-c", `echo "${GB_HOST_SECRET:-unset} $FOO ${PATH:+path}"`},
		Env: []string{"FOO=bar"}})
	pwd := mustCommand(t, CommandSpec{Name: "p", Command: []string{"pwd"}, Dir: dir})
	big := strings.Repeat("0123456789", 20000) // more than a pipe buffer
	callGate(t, withStdin, []byte(big)).check(t, 0, big, "")
	callGate(t, withStdin, nil).check(t, 0, "", "")
	callGate(t, noStdin, []byte("ignored")).check(t, 0, "", "")
	callGate(t, env, nil).check(t, 0, "unset bar path\n", "")
	real, _ := filepath.EvalSymlinks(dir)
	callGate(t, pwd, nil).check(t, 0, real+"\n", "")
}

func TestCommandOutputCap(t *testing.T) {
	g := mustCommand(t, CommandSpec{Name: "yes_", Command: []string{"sh", "-c", "yes | head -c 100000; yes e | head -c 5000 >&2"},
		MaxOutputBytes: 1000})
	r := callGate(t, g, nil)
	r.check(t, 0, strings.Repeat("y\n", 500), "")
	if !strings.Contains(r.errOut, "gatebridge: yes_: stdout truncated at 1000 bytes") ||
		!strings.Contains(r.errOut, "stderr truncated at 1000 bytes") {
		t.Errorf("stderr %q", r.errOut)
	}
}

// readPid waits for the command to record its child's pid.
func readPid(t *testing.T, file string) int {
	t.Helper()
	for range 250 {
		b, err := os.ReadFile(file)
		if s := strings.TrimSpace(string(b)); err == nil && s != "" {
			pid, err := strconv.Atoi(s)
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no pid recorded")
	return 0
}

func TestCommandTimeoutKillsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	script := "sleep 300 & echo $! > " + pidFile + "; wait"
	for _, tc := range []struct {
		name    string
		timeout time.Duration // CommandSpec.Timeout
		ctx     time.Duration // caller's deadline
	}{
		{"spec timeout", 300 * time.Millisecond, 0},
		{"ctx deadline", 0, 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(pidFile)
			g := mustCommand(t, CommandSpec{Name: "slow", Command: []string{"sh", "-c", script}, Timeout: tc.timeout})
			ctx := t.Context()
			if tc.ctx > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.ctx)
				defer cancel()
			}
			start := time.Now()
			r := callGateCtx(t, ctx, g, nil)
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("took %v", took)
			}
			r.check(t, ExitTimeout, "", "slow: command stopped: context deadline exceeded")
			if pid := readPid(t, pidFile); !processGone(pid) {
				t.Errorf("child %d still running", pid)
			}
		})
	}
}

func TestCommandReapsLeftovers(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	// The background sleep keeps stdout open; the call must still end when
	// sh exits, and take the sleep with it.
	g := mustCommand(t, CommandSpec{Name: "leftover", Command: []string{"sh", "-c", "sleep 300 & echo $! > " + pidFile + "; echo done"}})
	start := time.Now()
	callGate(t, g, nil).check(t, 0, "done\n", "")
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v", took)
	}
	if pid := readPid(t, pidFile); !processGone(pid) {
		t.Errorf("left-over child %d still running", pid)
	}
}
