package main

import (
	"bytes"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/gatebridge/gatebridge/internal/tty"
)

// run names the backend auto picked, and why, on stderr when stderr is a
// terminal (a person is watching: the cwd and speed differ by backend);
// not when it is a file or a pipe (--json has it as sandbox_reason).
func TestRunNamesAutoBackendOnTerminal(t *testing.T) {
	// auto finds neither docker nor bwrap and, allowed to, picks local:
	// the same here on every machine.
	t.Setenv("GATEBRIDGE_CONFIG", "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	t.Setenv("GATEBRIDGE_SANDBOX_BWRAP_PATH", "/nonexistent/bwrap")
	t.Setenv("GATEBRIDGE_SANDBOX_ALLOW_UNSANDBOXED", "true")
	t.Setenv("GATEBRIDGE_BRIDGE_SESSION_DIR", t.TempDir())
	args := []string{"run", "--workspace", t.TempDir(), "--", "true"}
	line := regexp.MustCompile(`(?m)^gatebridge: sandbox: local \(auto: docker: .*; bwrap: .*; local: usable\)\r?$`)

	master, slave, err := tty.OpenPTY()
	if err != nil {
		t.Skipf("no pty here: %v", err)
	}
	defer master.Close()
	var stdout bytes.Buffer
	code := run(args, strings.NewReader(""), &stdout, slave)
	slave.Close()
	got, _ := io.ReadAll(master) // what was written, then EIO: the slave is closed
	if code != 0 {
		t.Fatalf("exit %d; stderr %q", code, got)
	}
	if !line.Match(got) {
		t.Errorf("stderr on a terminal does not name the backend:\n%s", got)
	}

	for _, extra := range [][]string{nil, {"--json"}} {
		var out, errb bytes.Buffer
		a := append(append([]string{"run"}, extra...), args[1:]...)
		if code := run(a, strings.NewReader(""), &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d; stderr %q", a, code, errb.String())
		}
		if strings.Contains(errb.String(), "gatebridge: sandbox:") {
			t.Errorf("%v: stderr is no terminal, yet:\n%s", a, errb.String())
		}
	}
}
