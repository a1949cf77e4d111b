//go:build unix

package gates

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/gates/secrets"
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
	// printf shows exactly the argv the policy builds.
	show := CommandSpec{Name: "show", Command: []string{"printf", "<%s>"},
		Options:      []OptionRule{{Name: "-n", Value: "[0-9]+"}, {Name: "--format", Value: "[a-z%]+"}, {Name: "--oneline"}},
		Args:         []ArgRule{{Name: "REV", Pattern: "[A-Za-z0-9_.-]+"}, {Name: "PATH", Pattern: "[a-z/.-]+", Optional: true, Variadic: true, Max: 2}},
		EndOfOptions: "--end-of-options"}
	opts := mustCommand(t, show)
	show.Name, show.EndOfOptions = "noeoo", EndOfOptionsNone
	noEOO := mustCommand(t, show)
	flags := mustCommand(t, CommandSpec{Name: "flags", Command: []string{"printf", "<%s>"}, Options: []OptionRule{{Name: "-a"}, {Name: "-b"}}})
	for _, tc := range []struct {
		g Gate
		gateCase
	}{
		{list, gateCase{name: "allowed", args: []string{"hello", "bye"}, out: "hello bye\n"}},
		// The old policy checked only the first argument; this is the hole.
		{list, gateCase{name: "every arg checked", args: []string{"bye", "--anything"}, code: ExitDenied, out: "", err: `say: argument "--anything" is not allowed; every argument must be one of hello, bye (policy set by gates.commands[say].allow_args)`}},
		{list, gateCase{name: "refused", args: []string{"rm", "-rf"}, code: ExitDenied, out: "", err: `argument "rm" is not allowed`}},
		{list, gateCase{name: "no args", out: "\n"}},
		{list, gateCase{name: "prefix is not enough", args: []string{"hellox"}, code: ExitDenied, out: "", err: "not allowed"}},
		{pat, gateCase{name: "pattern", args: []string{"abc", "def"}, out: "abc def\n"}},
		{pat, gateCase{name: "pattern anchored", args: []string{"abc;"}, code: ExitDenied, out: "", err: "matching ^(?:[a-z]+)$"}},
		{pat, gateCase{name: "pattern case", args: []string{"ABC"}, code: ExitDenied, out: "", err: "not allowed"}},
		{fixed, gateCase{name: "fixed", out: "fixed\n"}},
		{fixed, gateCase{name: "fixed takes no args", args: []string{"x"}, code: ExitDenied, out: "", err: "fixed: takes no positional arguments"}},
		{fixed, gateCase{name: "fixed takes no options", args: []string{"--output=/x"}, code: ExitDenied, out: "", err: `fixed: option "--output" is not allowed; this gate takes no options`}},
		{both, gateCase{name: "both list", args: []string{"X"}, out: "X\n"}},
		{both, gateCase{name: "both pattern", args: []string{"aa"}, out: "aa\n"}},
		{raw, gateCase{name: "no shell", args: []string{"$(id)", "a;b", "`x`", "*", "\n"}, out: "$(id)|a;b|`x`|*|\n|"}},
		{raw, gateCase{name: "nul", args: []string{"a\x00"}, code: ExitUsage, out: "", err: "NUL"}},
		{opts, gateCase{name: "positional after marker", args: []string{"HEAD"}, out: "<--end-of-options><HEAD>"}},
		{opts, gateCase{name: "options both forms", args: []string{"-n", "3", "--format", "%h", "--oneline", "HEAD", "a/b"},
			out: "<-n><3><--format=%h><--oneline><--end-of-options><HEAD><a/b>"}},
		{opts, gateCase{name: "option equals form", args: []string{"--format=%s", "HEAD"}, out: "<--format=%s><--end-of-options><HEAD>"}},
		// After the caller's "--" a dash argument is a positional: its pattern
		// decides, and it goes after the marker, where it cannot be an option.
		{opts, gateCase{name: "caller dash dash", args: []string{"--", "-x"}, out: "<--end-of-options><-x>"}},
		{opts, gateCase{name: "caller dash dash pattern", args: []string{"--", "-x", "A"}, code: ExitDenied, out: "", err: `argument "A" (PATH) does not match`}},
		{opts, gateCase{name: "unknown long option", args: []string{"--output=/root/.ssh/authorized_keys", "HEAD"}, code: ExitDenied, out: "",
			err: `show: option "--output" is not allowed; allowed: --format, --oneline, -n (policy set by gates.commands[show].options)`}},
		{opts, gateCase{name: "unknown short option", args: []string{"-c", "core.pager=sh", "HEAD"}, code: ExitDenied, out: "", err: `option "-c" is not allowed`}},
		// "-n5" is "-n 5" as getopt reads it: split, the value checked the
		// same way, passed on as two words.
		{opts, gateCase{name: "attached short value", args: []string{"-n5", "HEAD"}, out: "<-n><5><--end-of-options><HEAD>"}},
		{opts, gateCase{name: "attached short value checked", args: []string{"-n5;x", "HEAD"}, code: ExitDenied, out: "", err: `value "5;x" of option -n does not match [0-9]+ (policy`}},
		{opts, gateCase{name: "attached value swallowing an option", args: []string{"-n--output=x", "HEAD"}, code: ExitDenied, out: "", err: `value "--output=x" of option -n does not match`}},
		{opts, gateCase{name: "short option equals", args: []string{"-n=5", "HEAD"}, code: ExitDenied, out: "", err: `value "=5" of option -n does not match [0-9]+; write -n 5 (policy`}},
		{opts, gateCase{name: "unknown glued short option", args: []string{"-c5", "HEAD"}, code: ExitDenied, out: "", err: `option "-c5" is not allowed`}},
		{flags, gateCase{name: "bundled flags", args: []string{"-ab"}, code: ExitDenied, out: "", err: `option "-ab" is not allowed; allowed: -a, -b; options are not bundled: write -a -b (policy`}},
		{flags, gateCase{name: "flags apart", args: []string{"-a", "-b"}, out: "<-a><-b>"}},
		{opts, gateCase{name: "bad option value", args: []string{"--format", "%n[diff]", "HEAD"}, code: ExitDenied, out: "", err: `value "%n[diff]" of option --format does not match`}},
		{opts, gateCase{name: "value swallowing an option", args: []string{"-n", "--output=x", "HEAD"}, code: ExitDenied, out: "", err: `value "--output=x" of option -n`}},
		{opts, gateCase{name: "flag with value", args: []string{"--oneline=yes", "HEAD"}, code: ExitDenied, out: "", err: "option --oneline takes no value"}},
		{opts, gateCase{name: "option needs value", args: []string{"HEAD", "-n"}, code: ExitDenied, out: "", err: "option -n needs a value"}},
		{opts, gateCase{name: "missing positional", args: []string{"--oneline"}, code: ExitDenied, out: "", err: "missing argument REV"}},
		{opts, gateCase{name: "variadic max", args: []string{"HEAD", "a", "b", "c"}, code: ExitDenied, out: "", err: `too many arguments: "c"`}},
		{opts, gateCase{name: "positional pattern", args: []string{"HEAD", "A"}, code: ExitDenied, out: "", err: `argument "A" (PATH) does not match`}},
		{noEOO, gateCase{name: "no marker", args: []string{"HEAD", "a"}, out: "<HEAD><a>"}},
		{noEOO, gateCase{name: "no marker refuses dash positional", args: []string{"HEAD", "--", "-x"}, code: ExitDenied, out: "", err: "starts with - and the command has no end-of-options marker"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			callGate(t, tc.g, tc.stdin, tc.args...).check(t, tc.code, tc.out, tc.err)
		})
	}
}

func TestCommandPolicyValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    CommandSpec
		err  string
	}{
		{"mixed forms", CommandSpec{AllowArgs: []string{"a"}, Options: []OptionRule{{Name: "-n"}}}, "allow_args: allow_args/allow_pattern cannot be combined"},
		{"no pattern", CommandSpec{Args: []ArgRule{{Name: "X"}}, EndOfOptions: "--"}, "args[0].pattern: required"},
		{"bad arg pattern", CommandSpec{Args: []ArgRule{{Pattern: "("}}, EndOfOptions: "--"}, "args[0].pattern: error parsing"},
		{"variadic not last", CommandSpec{Args: []ArgRule{{Pattern: "a", Variadic: true, Max: 2}, {Pattern: "b"}}, EndOfOptions: "--"}, "args[0].variadic: only the last"},
		{"variadic no max", CommandSpec{Args: []ArgRule{{Pattern: "a", Variadic: true}}, EndOfOptions: "--"}, "args[0].max: a variadic argument needs max"},
		{"required after optional", CommandSpec{Args: []ArgRule{{Pattern: "a", Optional: true}, {Pattern: "b"}}, EndOfOptions: "--"}, "args[1].optional"},
		{"no marker", CommandSpec{Args: []ArgRule{{Pattern: "a"}}}, "end_of_options: required when args: is set"},
		{"marker without args", CommandSpec{EndOfOptions: "--"}, "end_of_options: the gate takes no positional arguments"},
		{"bad marker", CommandSpec{Args: []ArgRule{{Pattern: "a"}}, EndOfOptions: "stop"}, "end_of_options: want"},
		{"bad option name", CommandSpec{Options: []OptionRule{{Name: "output"}}}, "options[0].name: want an option"},
		{"option with equals", CommandSpec{Options: []OptionRule{{Name: "--output=x"}}}, "options[0].name"},
		{"duplicate option", CommandSpec{Options: []OptionRule{{Name: "-n"}, {Name: "-n"}}}, "options[1].name: -n listed twice"},
		{"bad option value", CommandSpec{Options: []OptionRule{{Name: "-n", Value: "("}}}, "options[0].value"},
		{"relative home", CommandSpec{Home: "h"}, "home: want an absolute path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.s.Name, tc.s.Command = "g", []string{"echo"}
			_, err := NewCommand(tc.s)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want %q", err, tc.err)
			}
		})
	}
}

// A command the sandbox could have written is refused when the config is
// loaded: inside the workspace (or any dir it can write), or owned or
// writable by someone else.
func TestCommandPathTrust(t *testing.T) {
	ws := t.TempDir()
	tool := filepath.Join(ws, "tool")
	writeFile(t, tool, "#!/bin/sh\necho pwned\n")
	if err := os.Chmod(tool, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := NewCommand(CommandSpec{Name: "g", Command: []string{tool}, Untrusted: []string{ws}})
	if err == nil || !strings.Contains(err.Error(), "which the sandbox can write") {
		t.Errorf("command in the workspace: %v", err)
	}
	// Through a symlink from a trusted-looking place.
	link := filepath.Join(t.TempDir(), "tool")
	if err := os.Symlink(tool, link); err != nil {
		t.Fatal(err)
	}
	if _, err := NewCommand(CommandSpec{Name: "g", Command: []string{link}, Untrusted: []string{ws}}); err == nil {
		t.Error("a symlink into the workspace was accepted")
	}
	other := t.TempDir()
	gw := filepath.Join(other, "gw")
	writeFile(t, gw, "#!/bin/sh\n")
	os.Chmod(gw, 0o775)
	if _, err := NewCommand(CommandSpec{Name: "g", Command: []string{gw}}); err == nil || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("group-writable command: %v", err)
	}
	os.Chmod(gw, 0o755)
	os.Chmod(other, 0o777)
	if _, err := NewCommand(CommandSpec{Name: "g", Command: []string{gw}}); err == nil || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("command in a world-writable dir: %v", err)
	}
	os.Chmod(other, 0o755)
	if os.Geteuid() == 0 {
		if err := os.Chown(gw, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		if _, err := NewCommand(CommandSpec{Name: "g", Command: []string{gw}}); err == nil || !strings.Contains(err.Error(), "owned by uid 12345") {
			t.Errorf("command owned by another user: %v", err)
		}
		os.Chown(gw, 0, 0)
	}
	g, err := NewCommand(CommandSpec{Name: "g", Command: []string{gw}})
	if err != nil {
		t.Fatalf("trusted command refused: %v", err)
	}
	if p := g.(*commandGate).path; !filepath.IsAbs(p) {
		t.Errorf("path %q not absolute", p)
	}
}

// Each call gets its own empty HOME, removed afterwards: a file one call
// leaves there (a .gitconfig) is not seen by the next.
func TestCommandPrivateHome(t *testing.T) {
	g := mustCommand(t, CommandSpec{Name: "h", Command: []string{"sh", "-c", `ls -A "$HOME"; echo "$HOME" ; touch "$HOME/.gitconfig"`}})
	r1 := callGate(t, g, nil)
	r2 := callGate(t, g, nil)
	if r1.code != 0 || r2.code != 0 {
		t.Fatalf("exit %d %d", r1.code, r2.code)
	}
	h1, h2 := strings.TrimSpace(r1.out), strings.TrimSpace(r2.out)
	if h1 == h2 || strings.Contains(h2, ".gitconfig") || !strings.Contains(h1, "gatebridge-home-") {
		t.Errorf("HOME not private per call: %q then %q", h1, h2)
	}
	if _, err := os.Stat(h1); !os.IsNotExist(err) {
		t.Errorf("HOME %s left behind: %v", h1, err)
	}
	fixed := mustCommand(t, CommandSpec{Name: "h", Command: []string{"sh", "-c", `echo "$HOME"`}, Env: []string{"HOME=/nonexistent-home"}})
	callGate(t, fixed, nil).check(t, 0, "/nonexistent-home\n", "")
	// stdin is closed (/dev/null) without stdin: true.
	rd := mustCommand(t, CommandSpec{Name: "r", Command: []string{"sh", "-c", `cat; echo end`}})
	callGate(t, rd, []byte("secret")).check(t, 0, "end\n", "")
}

func TestCommandSpec(t *testing.T) {
	g := mustCommand(t, CommandSpec{Name: "git_ro", Command: []string{"echo", "git"},
		Options: []OptionRule{{Name: "-n", Value: "[0-9]+"}, {Name: "--stat"}},
		Args:    []ArgRule{{Name: "REV", Pattern: "[a-z]+", Optional: true}}, EndOfOptions: "--",
		Timeout: 3 * time.Second, Stdin: true})
	s := g.Spec()
	if s.Name != "git_ro" || s.Timeout != 3*time.Second || s.Stdin != StdinAlways {
		t.Errorf("spec %+v", s)
	}
	if s.Usage != "git_ro [--stat] [-n VALUE] [REV]" {
		t.Errorf("usage %q", s.Usage)
	}
	if s.Summary != "Run `echo git` on the host." {
		t.Errorf("summary %q", s.Summary)
	}
	if len(s.Params) != 3 || s.Params[2].Required || s.Params[2].Name != "REV" {
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

// The command inherits the host PATH only without entries that would let
// it run a program the sandbox planted: relative ones (the working
// directory, often the workspace) and those inside a sandbox-writable dir.
func TestCommandPathEnv(t *testing.T) {
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, "id"), "#!/bin/sh\necho pwned\n")
	if err := os.Chmod(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(ws, "id"), 0o755); err != nil {
		t.Fatal(err)
	}
	host := os.Getenv("PATH")
	t.Setenv("PATH", ws+":.::bin:"+host)
	g := mustCommand(t, CommandSpec{Name: "whoisit", Command: []string{"/bin/sh", "-c", `echo "$PATH"; id -u`}, Dir: ws, Untrusted: []string{ws}})
	r := callGate(t, g, nil)
	if r.code != 0 || strings.Contains(r.out, "pwned") {
		t.Fatalf("exit %d, stdout %q: the planted id ran", r.code, r.out)
	}
	path := strings.SplitN(r.out, "\n", 2)[0]
	for _, d := range filepath.SplitList(path) {
		if d == "" || !filepath.IsAbs(d) || d == ws {
			t.Errorf("PATH %q keeps %q", path, d)
		}
	}
	for _, bad := range []string{"PATH=.:/usr/bin", "PATH=/usr/bin::/bin", "PATH=" + ws + ":/usr/bin"} {
		_, err := NewCommand(CommandSpec{Name: "whoisit", Command: []string{"/bin/sh"}, Env: []string{bad}, Untrusted: []string{ws}})
		if err == nil || !strings.Contains(err.Error(), "env: PATH entry") {
			t.Errorf("%s: error %v", bad, err)
		}
	}
}

// A command gate gets a secret through its own env entry, read at each
// call (its output is redacted: the value comes back as [secret:db]); the
// variable the secret comes from is not passed on (the host environment
// never is), and a reference anywhere but env is refused.
func TestCommandSecrets(t *testing.T) {
	const value = "db-pass-0123456789"
	t.Setenv("GB_TEST_CMD_SECRET", value)
	store, err := secrets.New(map[string]secrets.Source{"db": {Env: "GB_TEST_CMD_SECRET"}}, secrets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	store.ScrubEnv()
	g := mustCommand(t, CommandSpec{Name: "db", Command: []string{"sh", "-c", `echo "$PGPASSWORD ${GB_TEST_CMD_SECRET:-unset}"`},
		Env: []string{"PGPASSWORD=${secret:db}"}, Secrets: store})
	callGate(t, g, nil).check(t, 0, "[secret:db] unset\n", "")

	// Output capped where the sandbox chooses (the length of an argument
	// printed before the secret) ends before the secret, not with its
	// start.
	capped := mustCommand(t, CommandSpec{Name: "db", Command: []string{"sh", "-c", `printf '%s%s\n' "$1" "$PGPASSWORD"`, "sh"},
		AllowPattern: "x+", MaxOutputBytes: 40, Env: []string{"PGPASSWORD=${secret:db}"}, Secrets: store})
	if r := callGate(t, capped, nil, strings.Repeat("x", 30)); r.code != 0 || strings.Contains(r.out, value[:10]) ||
		!strings.Contains(r.errOut, "stdout truncated at 40 bytes") {
		t.Errorf("capped: %+v", r)
	}

	base := CommandSpec{Name: "x", Command: []string{"echo"}, Secrets: store}
	for _, tc := range []struct {
		edit func(*CommandSpec)
		err  string
	}{
		{func(s *CommandSpec) { s.Command = []string{"echo", "${secret:db}"} }, "command: element 1 references a secret"},
		{func(s *CommandSpec) { s.Dir = "/tmp/${secret:db}" }, "dir: a path cannot reference a secret"},
		{func(s *CommandSpec) { s.Env = []string{"PATH=/bin:${secret:db}"} }, "env: PATH cannot reference a secret"},
		{func(s *CommandSpec) { s.Env = []string{"X=${secret:DB}"} }, "env: element 0: reference"},
		{func(s *CommandSpec) { s.Env, s.Secrets = []string{"X=${secret:db}"}, nil }, "no secrets are configured"},
	} {
		s := base
		tc.edit(&s)
		if _, err := NewCommand(s); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("error %v, want %q", err, tc.err)
		}
	}
	// Through the kind: an unknown secret is an error naming env, when
	// the gate is made.
	k, _ := NewKindRegistry().Lookup(KindCommand)
	_, err = k.New(context.Background(), CommandSpec{Name: "y", Command: []string{"echo"}, Env: []string{"X=${secret:nope}"}},
		Env{Secrets: store})
	var se *SettingError
	if !errors.As(err, &se) || se.Field != "env" || !errors.Is(err, secrets.ErrUnknown) || se.Help("k") == "" {
		t.Errorf("unknown secret through the kind: %v", err)
	}
}
