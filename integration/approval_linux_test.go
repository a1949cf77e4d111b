package integration

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/internal/tty"
)

// screen is what a person at the pty sees.
type screen struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// onTerminal runs gatebridge with a pty as its controlling terminal (and
// stdin, stdout, stderr); answer, when set, is typed once the screen
// shows the question. It returns the screen and the exit code.
func onTerminal(t *testing.T, answer string, args ...string) (string, int) {
	t.Helper()
	master, slave, err := tty.OpenPTY()
	if err != nil {
		t.Skipf("no pty here: %v", err)
	}
	defer master.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	var scr screen
	copied := make(chan struct{})
	go func() { io.Copy(&scr, master); close(copied) }()
	if answer != "" {
		for !strings.Contains(scr.String(), "? [y/n") {
			if ctx.Err() != nil {
				t.Fatalf("no question on the terminal: %q", scr.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		master.Write([]byte(answer + "\n"))
	}
	err = cmd.Wait()
	<-copied // EIO once every holder of the slave is gone
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return scr.String(), code
}

// A gate with approval: ask under run: the person at the terminal is
// asked; "a" keeps a grant that the next run uses without asking, that
// grants ls shows in words, and that stops working once removed; every
// decision and every command is in the audit log. Without a terminal the
// call is denied at once with a hint naming gatebridge grants.
func TestRunAsksOnTerminal(t *testing.T) {
	dir := t.TempDir()
	ws := workspace(t)
	cfg := filepath.Join(dir, "gatebridge.yaml")
	grants := filepath.Join(dir, "private", "grants.yaml")
	audit := filepath.Join(dir, "audit.log")
	must(t, os.WriteFile(cfg, []byte(`gates:
  commands:
    - name: greet
      command: [echo, hello]
      args: [{name: WHO, pattern: "[a-z]+"}]
      end_of_options: none
      approval: ask
approvals:
  grants_file: `+grants+`
audit:
  path: `+audit+`
`), 0o600))
	run := []string{"--config", cfg, "run", "--sandbox", "local", "--workspace", ws, "--", "sh", "-c", "greet world; echo rc=$?"}

	scr, code := onTerminal(t, "a", run...)
	if code != 0 || !strings.Contains(scr, "hello world") || !strings.Contains(scr, "rc=0") ||
		!strings.Contains(scr, `approval needed: gate "greet", 1 argument`) || !strings.Contains(scr, "approvals here guide, not guard") {
		t.Fatalf("first run (answered a), exit %d:\n%s", code, scr)
	}
	scr, code = onTerminal(t, "", run...)
	if code != 0 || strings.Contains(scr, "approval needed") || !strings.Contains(scr, "rc=0") {
		t.Fatalf("second run (the grant): exit %d:\n%s", code, scr)
	}
	out := gbRaw(t, ws, nil, nil, 0, "--config", cfg, "grants", "ls")
	m := regexp.MustCompile(`(?m)^(g-[0-9a-f]{8})  allows "greet" with exactly the arguments "world" in every workspace$`).FindStringSubmatch(out.Stdout)
	if out.Code != 0 || m == nil {
		t.Fatalf("grants ls: %+v", out)
	}
	if fi, err := os.Stat(grants); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("grants file: %v %v", fi, err)
	}
	if out := gbRaw(t, ws, nil, nil, 0, "--config", cfg, "grants", "rm", m[1]); out.Code != 0 {
		t.Fatalf("grants rm: %+v", out)
	}
	scr, code = onTerminal(t, "n", run...)
	if !strings.Contains(scr, "rc=126") || !strings.Contains(scr, "denied by the person") {
		t.Fatalf("after rm (answered n), exit %d:\n%s", code, scr)
	}
	// no terminal: denied at once, with the hint
	out = gbRaw(t, dir, nil, nil, 0, run...)
	if out.Stdout != "rc=126\n" || !strings.Contains(out.Stderr, "no terminal to ask on") || !strings.Contains(out.Stderr, "gatebridge grants add greet") {
		t.Fatalf("no terminal: %+v", out)
	}
	log, _ := os.ReadFile(audit)
	for _, want := range []string{`"kind":"approval"`, `"by":"person"`, `"by":"grant","grant":"` + m[1], `"by":"no_one"`,
		`"kind":"command","argv":["sh","-c","greet world; echo rc=$?"],"backend":"local"`} {
		if !bytes.Contains(log, []byte(want)) {
			t.Errorf("audit log lacks %s:\n%s", want, log)
		}
	}
}

// Attack: a grants.yaml the sandbox wrote into the workspace (or the
// cwd) is not read: the call is still asked about (here: denied, no
// terminal).
func TestPlantedGrantsIgnored(t *testing.T) {
	dir := t.TempDir()
	ws := workspace(t)
	cfg := filepath.Join(dir, "gatebridge.yaml")
	must(t, os.WriteFile(cfg, []byte("gates:\n  commands:\n    - {name: greet, command: [echo, hi], approval: ask}\n"), 0o600))
	planted := "grants:\n  - {id: g-00000001, gate: greet, any_args: true, lifetime: always, created: 2026-01-01T00:00:00Z}\n"
	env := []string{"XDG_CONFIG_HOME=" + filepath.Join(dir, "xdg")}
	out := gbRaw(t, ws, env, nil, 0, "--config", cfg, "run", "--sandbox", "local", "--workspace", ws, "--",
		"sh", "-c", "mkdir -p .config/gatebridge; printf '%s' '"+planted+"' | tee grants.yaml > .config/gatebridge/grants.yaml; greet; echo rc=$?")
	if !strings.Contains(out.Stdout, "rc=126") {
		t.Fatalf("a planted grant was used: %+v", out)
	}
}

// Under bwrap the command is in a session of its own: the person's
// terminal is not its controlling terminal, so it can neither open
// /dev/tty (to write a fake prompt or read the answer) nor push input
// into it (TIOCSTI).
func TestBwrapNoControllingTerminal(t *testing.T) {
	needBackend(t, "bwrap")
	script := `if (: </dev/tty) 2>/dev/null; then echo TTY-OPEN; else echo TTY-CLOSED; fi
if command -v python3 >/dev/null; then python3 -c 'import fcntl,termios
try:
  fcntl.ioctl(0, termios.TIOCSTI, b"x"); print("TIOCSTI-OK")
except OSError as e: print("TIOCSTI-REFUSED", e.errno)'; fi`
	scr, code := onTerminal(t, "", "run", "--sandbox", "bwrap", "--workspace", workspace(t), "--", "sh", "-c", script)
	t.Logf("under bwrap: %q", scr)
	if code != 0 || !strings.Contains(scr, "TTY-CLOSED") || strings.Contains(scr, "TIOCSTI-OK") {
		t.Fatalf("exit %d:\n%s", code, scr)
	}
}

// The command policy's ask under run: the person at the terminal is
// asked about the command (the prompt names the command and the rule)
// before anything starts; n refuses it (126, nothing ran), y runs it;
// without a terminal it is refused at once with a hint. Each decision is
// in the audit log.
func TestRunAsksCommandPolicyOnTerminal(t *testing.T) {
	dir := t.TempDir()
	ws := workspace(t)
	cfg := filepath.Join(dir, "gatebridge.yaml")
	audit := filepath.Join(dir, "audit.log")
	must(t, os.WriteFile(cfg, []byte(`policy:
  commands:
    rules:
      - {command: touch, decision: ask}
approvals:
  grants_file: `+filepath.Join(dir, "private", "grants.yaml")+`
audit:
  path: `+audit+`
`), 0o600))
	marker := filepath.Join(ws, "marker")
	run := []string{"--config", cfg, "run", "--sandbox", "local", "--workspace", ws, "--", "sh", "-c", "touch marker; echo ran"}

	scr, code := onTerminal(t, "n", run...)
	if code != 126 || strings.Contains(scr, "\nran") || !strings.Contains(scr, `approval needed: command sh -c "touch marker; echo ran"`) ||
		!strings.Contains(scr, "command touch marker needs approval by rule 0 {command: touch, decision: ask}") ||
		!strings.Contains(scr, "denied by the person") {
		t.Fatalf("answered n, exit %d:\n%s", code, scr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the refused command ran")
	}
	scr, code = onTerminal(t, "y", run...)
	if code != 0 || !strings.Contains(scr, "ran") {
		t.Fatalf("answered y, exit %d:\n%s", code, scr)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the allowed command did not run: %v", err)
	}
	out := gbRaw(t, dir, nil, nil, 0, run...)
	if out.Code != 126 || out.Stdout != "" || !strings.Contains(out.Stderr, "no terminal to ask on") || !strings.Contains(out.Stderr, "hint: ") {
		t.Fatalf("no terminal: %+v", out)
	}
	log, _ := os.ReadFile(audit)
	for _, want := range []string{`"command":["sh","-c","touch marker; echo ran"],"args":[],"decision":"deny","by":"person"`,
		`"decision":"allow","by":"person","scope":"this command"`, `"by":"no_one"`} {
		if !bytes.Contains(log, []byte(want)) {
			t.Errorf("audit log lacks %s:\n%s", want, log)
		}
	}
}
