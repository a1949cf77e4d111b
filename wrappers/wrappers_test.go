package wrappers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
)

// shells are the interpreters every wrapper must work under.
func shells(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for name, argv := range map[string][]string{
		"dash":       {"dash"},
		"bash":       {"bash"},
		"bash-posix": {"bash", "--posix"},
		"busybox":    {"busybox", "sh"},
		"mksh":       {"mksh"},
		"yash":       {"yash"},
		"ksh93":      {"ksh93"},
		"zsh-sh":     {"zsh", "--emulate", "sh"},
		// zsh in its native mode: what `zsh "$(command -v gate)"` runs
		// (an unmatched glob is an error there, words are not split).
		"zsh":  {"zsh"},
		"posh": {"posh"},
	} {
		if _, err := exec.LookPath(argv[0]); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s not installed (CI installs it): %v", name, err)
			}
			t.Logf("skipping shell %s: not installed", name)
			continue
		}
		out[name] = argv
	}
	return out
}

// fakeHost answers calls in dir the way the bridge does, with a trivial
// gate: stdout = each arg as "<len>:<bytes>\n", stdin appended as "stdin:<len>:<bytes>".
type fakeHost struct {
	dir  string
	mu   sync.Mutex
	seen map[string]bool
	exit int
	big  bool // force the cat path (output past mailbox.InlineMax)
	wake bool
	// stream: send stdout through <id>.stream (split in two writes, a
	// wake between them) before the answer, which holds only stderr
	stream bool
	done   chan struct{}
	wg     sync.WaitGroup
}

func newFakeHost(t *testing.T) *fakeHost {
	dir := t.TempDir()
	for _, d := range []string{"bin", "calls", "responses"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h := &fakeHost{dir: dir, seen: map[string]bool{}, wake: true, done: make(chan struct{})}
	h.wg.Add(1)
	go h.loop()
	t.Cleanup(func() { close(h.done); h.wg.Wait() })
	return h
}

func (h *fakeHost) loop() {
	defer h.wg.Done()
	for {
		select {
		case <-h.done:
			return
		case <-time.After(time.Millisecond):
		}
		ents, _ := os.ReadDir(filepath.Join(h.dir, "calls"))
		for _, e := range ents {
			id := e.Name()
			cd := filepath.Join(h.dir, "calls", id)
			if _, err := os.Stat(filepath.Join(cd, "ready")); err != nil {
				continue
			}
			h.mu.Lock()
			dup := h.seen[id]
			h.seen[id] = true
			exit := h.exit
			h.mu.Unlock()
			if dup {
				continue
			}
			h.answer(id, cd, exit)
		}
	}
}

func (h *fakeHost) answer(id, cd string, exit int) {
	if fi, err := os.Lstat(filepath.Join(cd, mailbox.FileReady)); err != nil || !fi.Mode().IsRegular() {
		return
	}
	var out bytes.Buffer
	version, gate := 2, "?"
	b, err := os.ReadFile(filepath.Join(cd, mailbox.FileArgv))
	var args []string
	if err == nil {
		_, gate, args, err = mailbox.DecodeArgv(b, mailbox.Limits{MaxArgs: 1000, MaxArgBytes: 1 << 20})
	}
	if err != nil {
		fmt.Fprintf(&out, "error: %v\n", err)
	} else {
		fmt.Fprintf(&out, "gate:%s\n", gate)
		for _, a := range args {
			fmt.Fprintf(&out, "%d:%s\n", len(a), a)
		}
		if stdin, err := os.ReadFile(filepath.Join(cd, mailbox.FileStdin)); err == nil {
			fmt.Fprintf(&out, "stdin:%d:%s", len(stdin), stdin)
		}
	}
	h.mu.Lock()
	big, wake, stream := h.big, h.wake, h.stream
	h.mu.Unlock()
	if big {
		out.WriteString(strings.Repeat("#", mailbox.InlineMax)) // past the inline limit: cat prints it
	}
	x := filepath.Join(h.dir, mailbox.DirResponses, id)
	if stream && mailbox.Streamable(out.Bytes()) {
		st, err := os.OpenFile(x+mailbox.ExtStream, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o640)
		if err != nil {
			return
		}
		b := out.Bytes()
		half := len(b) / 2
		st.Write(mailbox.StreamLines(false, b[:half]))
		wakeFIFO(cd)
		time.Sleep(50 * time.Millisecond)
		st.Write(mailbox.StreamLines(false, b[half:]))
		st.Close()
		out.Reset()
	}
	respond(x, version, mailbox.Answer{Code: exit, Stdout: out.Bytes(), Stderr: []byte("err-" + gate)})
	if wake {
		wakeFIFO(cd)
	}
}

// respond writes an answer as the bridge does, with the mailbox's
// encoding: the output files first when it is not inline, then the exit
// file, each renamed into place. x is responses/<id>.
func respond(x string, version int, a mailbox.Answer) {
	exit, inline := mailbox.EncodeExit(version, a)
	if !inline {
		writeAtomic(x+mailbox.ExtStdout, a.Stdout)
		writeAtomic(x+mailbox.ExtStderr, a.Stderr)
	}
	writeAtomic(x+mailbox.ExtExit, exit)
}

func writeAtomic(path string, b []byte) {
	if len(b) == 0 && !strings.HasSuffix(path, mailbox.ExtExit) {
		return
	}
	os.WriteFile(path+".tmp", b, 0o640)
	os.Rename(path+".tmp", path)
}

// wakeFIFO writes a byte to the call's wake FIFO if someone reads it.
func wakeFIFO(cd string) {
	f, err := os.OpenFile(filepath.Join(cd, mailbox.FileWake), os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	f.Write([]byte{'\n'})
	f.Close()
}

// newFakeHostWithSlots is a fake host with call slots prepared as the
// bridge prepares them: a directory holding the wake FIFO, made in
// responses/ and renamed into calls/ once complete.
func newFakeHostWithSlots(t *testing.T, names ...string) *fakeHost {
	t.Helper()
	h := newFakeHost(t)
	for _, n := range names {
		makeSlot(t, h.dir, n)
	}
	return h
}

func makeSlot(t *testing.T, dir, name string) {
	t.Helper()
	tmp := filepath.Join(dir, mailbox.DirResponses, ".slot-"+name)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(tmp, mailbox.FileWake), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, mailbox.DirCalls, name)); err != nil {
		t.Fatal(err)
	}
}

func (h *fakeHost) install(t *testing.T, s Spec) string {
	t.Helper()
	if err := WriteDir(filepath.Join(h.dir, "bin"), []Spec{s}); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(h.dir, "bin", s.Name)
}

// wrapperDir is the working directory runWrapper runs wrappers in ("":
// the test's).
var wrapperDir string

func runWrapper(t *testing.T, shell []string, script string, env []string, stdin []byte, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, shell[0], append(append(shell[1:], script), args...)...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	cmd.Dir = wrapperDir
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run: %v", err)
	}
	return so.String(), se.String(), code
}

var hostileArgs = []string{
	"plain", "a b", "", "it's", `"dq"`, "tab\there", "new\nline", "trail\n", "\n", "$HOME", "`id`",
	"$(id)", `back\slash\n`, "-n", "-e", "--", "-", "*", "?", "[a]", "~", ";", "|", "&", "\xff\xfe\x80", "é", " lead", "trail ",
	strings.Repeat("x", 5000),
}

func expected(gate string, args []string, stdin *string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "gate:%s\n", gate)
	for _, a := range args {
		fmt.Fprintf(&b, "%d:%s\n", len(a), a)
	}
	if stdin != nil {
		fmt.Fprintf(&b, "stdin:%d:%s", len(*stdin), *stdin)
	}
	return b.String()
}

func TestArgsRoundTripByteExact(t *testing.T) {
	for name, sh := range shells(t) {
		for _, mode := range []struct {
			name   string
			env    []string
			big    bool
			stream bool
		}{{"fifo-text", nil, false, false}, {"fifo-cat", nil, true, false}, {"poll", []string{"GATEBRIDGE_WAKE=poll"}, false, false},
			{"fifo-stream", nil, false, true}, {"poll-stream", []string{"GATEBRIDGE_WAKE=poll"}, false, true}} {
			t.Run(name+"/"+mode.name, func(t *testing.T) {
				h := newFakeHost(t)
				h.mu.Lock()
				h.big = mode.big
				h.wake = mode.env == nil
				h.stream = mode.stream
				h.mu.Unlock()
				script := h.install(t, Spec{Name: "probe"})
				args := hostileArgs
				if !mode.big {
					// short ASCII text: travels inline
					args = slices.DeleteFunc(slices.Clone(hostileArgs), func(a string) bool { return len(a) > 100 || !isASCII(a) })
				}
				if name == "yash" {
					// yash in the C locale cannot hold a byte past 0x7f in
					// a variable at all ("cannot convert the argument")
					args = slices.DeleteFunc(slices.Clone(args), func(a string) bool { return !isASCII(a) })
				}
				out, errOut, code := runWrapper(t, sh, script, mode.env, nil, args...)
				if code != 0 {
					t.Fatalf("exit %d, stderr %q", code, errOut)
				}
				want := expected("probe", args, nil)
				if mode.big {
					want += strings.Repeat("#", mailbox.InlineMax)
				}
				if out != want {
					t.Errorf("stdout mismatch\n got %q\nwant %q", out, want)
				}
				// The answer took the path the mode is about.
				files, _ := filepath.Glob(filepath.Join(h.dir, "responses", "*"+mailbox.ExtStdout))
				if inline := len(files) == 0; inline == mode.big {
					t.Errorf("answer files %v: want inline=%v", files, !mode.big)
				}
				if errOut != "err-probe" {
					t.Errorf("stderr = %q, want %q", errOut, "err-probe")
				}
			})
		}
	}
}

func TestExitCodePropagates(t *testing.T) {
	for name, sh := range shells(t) {
		t.Run(name, func(t *testing.T) {
			h := newFakeHost(t)
			h.mu.Lock()
			h.exit = 42
			h.mu.Unlock()
			script := h.install(t, Spec{Name: "probe"})
			if _, _, code := runWrapper(t, sh, script, nil, nil, "x"); code != 42 {
				t.Fatalf("exit = %d, want 42", code)
			}
		})
	}
}

func TestStdinModes(t *testing.T) {
	in := "a\nb\n\xff"
	for name, sh := range shells(t) {
		t.Run(name, func(t *testing.T) {
			h := newFakeHost(t)
			none := h.install(t, Spec{Name: "none"})
			always := h.install(t, Spec{Name: "always", Stdin: mailbox.StdinAlways})
			noargs := h.install(t, Spec{Name: "noargs", Stdin: mailbox.StdinIfNoArgs})
			check := func(script, gate string, args []string, want *string) {
				t.Helper()
				out, se, code := runWrapper(t, sh, script, nil, []byte(in), args...)
				if code != 0 {
					t.Fatalf("%s: exit %d: %s", gate, code, se)
				}
				if w := expected(gate, args, want); out != w {
					t.Errorf("%s %q: got %q want %q", gate, args, out, w)
				}
			}
			check(none, "none", nil, nil)
			check(always, "always", []string{"f"}, &in)
			check(noargs, "noargs", nil, &in)
			check(noargs, "noargs", []string{"x"}, nil)
			atdash := h.install(t, Spec{Name: "atdash", Stdin: mailbox.StdinIfAtDash})
			check(atdash, "atdash", []string{"--data-binary", "@-", "u"}, &in)
			check(atdash, "atdash", []string{"-d", "@-x", "u"}, nil)
			check(atdash, "atdash", nil, nil)
		})
	}
}

func TestMissingCallsDir(t *testing.T) {
	for name, sh := range shells(t) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := WriteDir(dir, []Spec{{Name: "probe"}}); err != nil {
				t.Fatal(err)
			}
			_, se, code := runWrapper(t, sh, filepath.Join(dir, "probe"), []string{"GATEBRIDGE_CALLS_DIR=" + dir + "/nope"}, nil)
			if code != 1 || !strings.Contains(se, "gatebridge: probe: calls dir") {
				t.Fatalf("exit %d stderr %q", code, se)
			}
		})
	}
}

func TestWaitTimeout(t *testing.T) {
	for name, sh := range shells(t) {
		for _, mode := range []string{"fifo", "poll"} {
			if (name == "dash" || name == "yash" || name == "posh") && mode == "fifo" {
				continue // no read -t: the fifo wait relies on the host
			}
			t.Run(name+"/"+mode, func(t *testing.T) {
				dir := t.TempDir()
				os.Mkdir(filepath.Join(dir, "calls"), 0o755)
				os.Mkdir(filepath.Join(dir, "responses"), 0o755)
				os.Mkdir(filepath.Join(dir, "bin"), 0o755)
				WriteDir(filepath.Join(dir, "bin"), []Spec{{Name: "probe"}})
				_, se, code := runWrapper(t, sh, filepath.Join(dir, "bin", "probe"),
					[]string{"GATEBRIDGE_WAIT_TIMEOUT=1", "GATEBRIDGE_WAKE=" + mode}, nil)
				if code != 124 || !strings.Contains(se, "timed out waiting for the host") {
					t.Fatalf("exit %d stderr %q", code, se)
				}
			})
		}
	}
}

func TestMalformedExitCode(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"bin", "calls", "responses"} {
		os.Mkdir(filepath.Join(dir, d), 0o755)
	}
	WriteDir(filepath.Join(dir, "bin"), []Spec{{Name: "probe"}})
	// a host that answers with garbage in .exit
	go func() {
		for range 2000 {
			ents, _ := os.ReadDir(filepath.Join(dir, "calls"))
			for _, e := range ents {
				if _, err := os.Stat(filepath.Join(dir, "calls", e.Name(), "ready")); err == nil {
					os.WriteFile(filepath.Join(dir, "responses", e.Name()+".exit"), []byte("rm -rf /\n"), 0o644)
					if f, err := os.OpenFile(filepath.Join(dir, "calls", e.Name(), "wake"), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
						f.Write([]byte("\n"))
						f.Close()
					}
					return
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	_, se, code := runWrapper(t, []string{"dash"}, filepath.Join(dir, "bin", "probe"), nil, nil)
	if code != 1 || !strings.Contains(se, "malformed exit code") {
		t.Fatalf("exit %d stderr %q", code, se)
	}
}

func TestScriptHasNoInjectedText(t *testing.T) {
	evil := "x\n$(touch /tmp/pwned)\r\n`id`; rm -rf / \u2028 '\" \x00"
	s, err := Script(Spec{Name: "probe", Summary: evil})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(s), "\n")
	for _, l := range lines {
		if strings.Contains(l, "touch /tmp/pwned") && !strings.HasPrefix(l, "# ") {
			t.Fatalf("summary escaped its comment: %q", l)
		}
	}
	if bytes.ContainsAny(s, "\x00\r") {
		t.Fatal("script contains NUL or CR")
	}
	if _, err := Script(Spec{Name: "a;b"}); err == nil {
		t.Fatal("bad name accepted")
	}
}

func FuzzScript(f *testing.F) {
	f.Add("probe", "summary")
	f.Add("x", "a\n$(id)\n`id`")
	f.Add("done", "")
	f.Add("a'b", "'; exit 3; '")
	f.Add("inj", "$(touch \"$INJECT\")\n`touch \"$INJECT\"`\n; touch \"$INJECT\" #")
	f.Add("inj2", "\u2028touch \"$INJECT\"\r\ntouch \"$INJECT\"")
	f.Fuzz(func(t *testing.T, name, summary string) {
		s, err := Script(Spec{Name: name, Summary: summary})
		if err != nil {
			if mailbox.ValidateName(name) == nil {
				t.Fatalf("valid name %q rejected: %v", name, err)
			}
			return
		}
		// Everything after the fixed header must be the fixed template.
		text := string(s)
		hdr := "#!/bin/sh\n# gatebridge wrapper for gate " + name + " (generated, do not edit)\n"
		if !strings.HasPrefix(text, hdr) {
			t.Fatalf("unexpected header: %q", text[:min(len(text), 120)])
		}
		rest := text[len(hdr):]
		if strings.HasPrefix(rest, "# ") {
			nl := strings.IndexByte(rest, '\n')
			rest = rest[nl+1:]
		}
		if !strings.HasPrefix(rest, "g='"+name+"'\n"+templates().head) {
			t.Fatalf("summary leaked into the script body: %q", rest[:min(len(rest), 200)])
		}
		if strings.ContainsAny(summary, "\n") && strings.Count(text, "\n") != strings.Count(string(mustScript(t, name)), "\n")+1 &&
			strings.TrimSpace(sanitizeComment(summary)) != "" {
			t.Fatalf("line count changed by summary")
		}
		// The script must parse in every shell we have, for any summary,
		// and running it (with no session: it fails at once) must not
		// execute anything from the summary.
		marker := filepath.Join(t.TempDir(), "injected")
		for _, sh := range fuzzShells() {
			cmd := exec.Command(sh, "-n", "/dev/stdin")
			cmd.Stdin = strings.NewReader(text)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s -n rejects the script for %q/%q: %v: %s", sh, name, summary, err, out)
			}
			run := exec.Command(sh, "-c", text, name)
			run.Env = []string{"PATH=" + os.Getenv("PATH"), "GATEBRIDGE_CALLS_DIR=/nonexistent/calls", "INJECT=" + marker}
			out, err := run.CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.HasPrefix(string(out), "gatebridge: "+name+": calls dir") {
				t.Fatalf("%s running the script without a session: %v: %q", sh, err, out)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("summary %q was executed", summary)
			}
		}
	})
}

var fuzzShellsOnce = sync.OnceValue(func() []string {
	var shs []string
	for _, sh := range []string{"sh", "dash", "bash"} {
		if p, err := exec.LookPath(sh); err == nil {
			shs = append(shs, p)
		}
	}
	return shs
})

// fuzzShells are the shells FuzzScript checks the syntax with.
func fuzzShells() []string { return fuzzShellsOnce() }

func mustScript(t *testing.T, name string) []byte {
	s, err := Script(Spec{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// A wrapper stopped by INT, TERM or HUP while it waits dies of the signal,
// as a command would (the caller's $? is 128+n), and when it polls it
// first leaves the cancel marker for the host. No host answers here, so a
// wrapper that ignored the signal would wait until the test's timeout.
func TestSignalLeavesCancelMarker(t *testing.T) {
	sigs := map[string]syscall.Signal{"INT": syscall.SIGINT, "TERM": syscall.SIGTERM, "HUP": syscall.SIGHUP}
	for name, sh := range shells(t) {
		for _, mode := range []string{"fifo", "poll"} {
			for sname, sig := range sigs {
				t.Run(name+"/"+mode+"/"+sname, func(t *testing.T) {
					t.Parallel()
					dir := t.TempDir()
					for _, d := range []string{"bin", "calls", "responses"} {
						os.Mkdir(filepath.Join(dir, d), 0o755)
					}
					if err := WriteDir(filepath.Join(dir, "bin"), []Spec{{Name: "slow"}}); err != nil {
						t.Fatal(err)
					}
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					cmd := exec.CommandContext(ctx, sh[0], append(sh[1:], filepath.Join(dir, "bin", "slow"))...)
					cmd.Env = []string{"PATH=/usr/bin:/bin", "GATEBRIDGE_WAKE=" + mode}
					if err := cmd.Start(); err != nil {
						t.Fatal(err)
					}
					ready := ""
					for i := 0; i < 400 && ready == ""; i++ {
						time.Sleep(5 * time.Millisecond)
						m, _ := filepath.Glob(filepath.Join(dir, "calls", "*", "ready"))
						if len(m) == 1 {
							ready = m[0]
						}
					}
					if ready == "" {
						cmd.Process.Kill()
						t.Fatal("the wrapper never published its call")
					}
					time.Sleep(20 * time.Millisecond) // waiting in read or sleep
					cmd.Process.Signal(sig)
					err := cmd.Wait()
					var ee *exec.ExitError
					if !errors.As(err, &ee) {
						t.Fatalf("wait: %v", err)
					}
					// Some shells die of the re-raised signal, others exit
					// 128+n from the trap: the caller's $? is the same.
					// zsh exits 1 on HUP, as it does for any script.
					ws := ee.Sys().(syscall.WaitStatus)
					if !(ws.Signaled() && ws.Signal() == sig) && ws.ExitStatus() != 128+int(sig) &&
						!(strings.HasPrefix(name, "zsh") && sig == syscall.SIGHUP && ws.ExitStatus() == 1) {
						t.Errorf("wrapper ended with %v (exit %d), want killed by %v or exit %d", ws, ws.ExitStatus(), sig, 128+int(sig))
					}
					// Polling, the marker is how the host learns it; on the
					// FIFO, the host sees no reader (bridge tests).
					if _, err := os.Stat(filepath.Join(filepath.Dir(ready), "cancel")); mode == "poll" && err != nil {
						t.Errorf("no cancel marker: %v", err)
					}
				})
			}
		}
	}
}

// Every shell claims a slot the host prepared (set -C: an exclusive create
// of argv) and then needs no program at all (mksh and posh: printf, not a
// builtin there): PATH holds nothing else here, so a wrapper that ran
// mkdir, mkfifo or cat would fail. A second call takes
// the next slot; with none left the wrapper makes its own directory.
func TestSlotClaimWithoutPrograms(t *testing.T) {
	for name, sh := range shells(t) {
		t.Run(name, func(t *testing.T) {
			h := newFakeHostWithSlots(t, "_1", "_2")
			script := h.install(t, Spec{Name: "probe"})
			args := []string{"a b", "", "$x", "-n"}
			path := "/nonexistent"
			if name == "mksh" || name == "posh" {
				// printf is not a builtin there: it is the one program
				// such a call runs.
				path = t.TempDir()
				p, err := exec.LookPath("printf")
				if err != nil {
					t.Fatal(err)
				}
				os.Symlink(p, filepath.Join(path, "printf"))
			}
			for i := range 2 {
				out, errOut, code := runWrapper(t, sh, script, []string{"PATH=" + path}, nil, args...)
				if code != 0 || out != expected("probe", args, nil) {
					t.Fatalf("call %d: exit %d, stdout %q, stderr %q", i, code, out, errOut)
				}
			}
			for _, n := range []string{"_1", "_2"} {
				if _, err := os.Stat(filepath.Join(h.dir, "calls", n, mailbox.FileReady)); err != nil {
					t.Errorf("slot %s not used: %v", n, err)
				}
			}
			// No slot left: the wrapper runs mkdir.
			out, errOut, code := runWrapper(t, sh, script, nil, nil, "x")
			if code != 0 || out != expected("probe", []string{"x"}, nil) {
				t.Fatalf("fallback: exit %d, stdout %q, stderr %q", code, out, errOut)
			}
		})
	}
}

// A slot that cannot be published (here its ready is a directory; in life
// the host dropped it between the claim and the publication) is given up:
// the wrapper starts over in a directory of its own, in every shell.
func TestSlotLostStartsOver(t *testing.T) {
	for name, sh := range shells(t) {
		t.Run(name, func(t *testing.T) {
			h := newFakeHostWithSlots(t, "_1")
			os.Mkdir(filepath.Join(h.dir, "calls", "_1", mailbox.FileReady), 0o755)
			script := h.install(t, Spec{Name: "probe"})
			out, errOut, code := runWrapper(t, sh, script, nil, nil, "a b")
			if code != 0 || out != expected("probe", []string{"a b"}, nil) {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
			}
			if _, err := os.Stat(filepath.Join(h.dir, "calls", "_1", mailbox.FileArgv)); err != nil {
				t.Errorf("the slot was not claimed first: %v", err)
			}
		})
	}
}

// A wrapper run by a relative path, as `./bin/gate` or from a relative
// PATH entry, finds its session from $0, and one whose slot is lost runs
// itself again from the caller's directory (it works from inside calls/).
func TestRelativeInvocation(t *testing.T) {
	for name, sh := range shells(t) {
		t.Run(name, func(t *testing.T) {
			h := newFakeHostWithSlots(t, "_1")
			os.Mkdir(filepath.Join(h.dir, "calls", "_1", mailbox.FileReady), 0o755) // lost slot
			h.install(t, Spec{Name: "probe"})
			wrapperDir = h.dir
			defer func() { wrapperDir = "" }()
			out, errOut, code := runWrapper(t, sh, "bin/probe", nil, nil, "x")
			if code != 0 || out != expected("probe", []string{"x"}, nil) {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
			}
		})
	}
}
