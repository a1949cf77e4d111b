package httpgate

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/sandbox"
)

// execBackend runs the command as a host process (the session tests need
// no isolation, only the mailbox and the wrappers).
type execBackend struct{}

func (execBackend) Name() string { return "test" }
func (execBackend) Run(ctx context.Context, spec *sandbox.Spec) (*sandbox.Result, error) {
	cmd := exec.CommandContext(ctx, spec.Command[0], spec.Command[1:]...)
	cmd.Env = sandbox.MergeEnv(os.Environ(), sandbox.SessionEnv(spec, spec.Session, os.Getenv("PATH")), spec.Env)
	cmd.Dir = spec.Workspace
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		return nil, err
	}
	return &sandbox.Result{ExitCode: code, Stdout: so.Bytes(), Stderr: se.Bytes()}, nil
}

// Through a session, as a sandboxed command calls it: the token a rule
// injects is echoed back by the server and reaches the sandbox only as
// [secret:gh]; a 20 MB body on stdin is refused by the mailbox's stdin cap
// before the gate runs, and nothing reaches the network; a call without
// @- does not read (or wait for) stdin.
func TestInSession(t *testing.T) {
	ts := newTestServer(t, false)
	st := testStore(t, token)
	reg := gates.NewRegistry()
	g := newGate(t, Config{Rules: []Rule{{URL: ts.URL + "/", Methods: []string{"GET", "POST"}, AllowPrivate: true,
		Headers: map[string]string{"Authorization": "Bearer ${secret:gh}"}}}}, gates.Env{Secrets: st})
	reg.MustRegister(g)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	script := `http -i "$U/echo" | tr a-z A-Z; echo "rc=$?"
head -c 20000000 /dev/zero | http --data-binary @- "$U/echo"; echo "big=$?"
printf 'x=1' | http -d @- "$U/echo" | tail -n 1; echo
echo unread | { http "$U/status?code=200"; cat; }`
	res, err := bridge.Run(ctx, bridge.Config{Gates: reg, Dir: t.TempDir(), Redact: st.Redactor()}, execBackend{},
		sandbox.Spec{Command: []string{"sh", "-c", script}, Env: []string{"U=" + ts.URL}, Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	out := res.Stdout
	if strings.Contains(strings.ToUpper(out), strings.ToUpper(token)) || !strings.Contains(out, "AUTHORIZATION: BEARER [SECRET:GH]") {
		t.Errorf("the token reached the sandbox, or no redaction: %q", out)
	}
	if !strings.Contains(out, "big=126") || !strings.Contains(res.Stderr, "max_stdin_bytes") {
		t.Errorf("20 MB body: %q / %q", out, res.Stderr)
	}
	if !strings.Contains(out, "\nx=1\n") || !strings.HasSuffix(out, "status body\nunread\n") {
		t.Errorf("stdin: %q", out)
	}
	for _, p := range ts.hits() {
		if p != "/echo" && p != "/status" {
			t.Errorf("hit %s", p)
		}
	}
	if n := len(ts.hits()); n != 3 {
		t.Errorf("%d requests reached the server, want 3 (the 20 MB one must not): %v", n, ts.hits())
	}
	var ev []byte
	for _, c := range res.Calls {
		for _, e := range c.Events {
			ev = append(ev, e...)
		}
	}
	if !bytes.Contains(ev, []byte(`"url":"`+ts.URL+`/echo"`)) {
		t.Errorf("events: %s", ev)
	}
}
