package bridge

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/gates/secrets"
	"github.com/gatebridge/gatebridge/sandbox"
)

const secretValue = "ghp_0123456789abcdefSECRET"

// lockedBuffer is an audit log tests can read while sessions write it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// leakRegistry has gates that leak the secret every way a gate can: split
// across two writes with a pause between (so that the first half streams
// before the second is written), on stdout and stderr, in an error, and
// in an audit event.
func leakRegistry(t *testing.T) *gates.Registry {
	r := testRegistry(t)
	half := len(secretValue) / 2
	r.MustRegister(gates.Func(gates.Spec{Name: "t_leak"}, func(ctx context.Context, c *gates.Call) (int, error) {
		for _, w := range []interface{ Write([]byte) (int, error) }{c.Stdout, c.Stderr} {
			w.Write([]byte("token: " + secretValue[:half]))
		}
		time.Sleep(150 * time.Millisecond) // past streamAfter: the first half streams
		for _, w := range []interface{ Write([]byte) (int, error) }{c.Stdout, c.Stderr} {
			w.Write([]byte(secretValue[half:] + " end\n"))
		}
		if c.Audit != nil {
			c.Audit(map[string]any{"kind": "test", "url": "https://x/?t=" + secretValue, "n": 1})
		}
		return 0, errors.New("upstream said: bad token " + secretValue)
	}))
	return r
}

func testRedact() *secrets.Redactor {
	r := secrets.NewRedactor()
	r.Add("gh", secretValue)
	return r
}

// A gate's output reaches the sandbox redacted, streamed or not, also
// when the secret is split across two writes; gatebridge's message quoting
// the gate's error too. The sandboxed command upper-cases what it got, so
// that the redaction of its own output (Session.Run) cannot hide a leak of
// the gate's.
func TestGateOutputRedacted(t *testing.T) {
	audit := &lockedBuffer{}
	cfg := Config{Gates: leakRegistry(t), Redact: testRedact(), Audit: audit}
	res := run(t, cfg, `t_leak 2>&1 | tr a-z A-Z; t_leak >/dev/null 2>/tmp/gb-redact-$$; tr a-z A-Z < /tmp/gb-redact-$$; rm -f /tmp/gb-redact-$$`)
	up := strings.ToUpper(secretValue)
	if strings.Contains(res.Stdout, up) || strings.Contains(res.Stdout, up[:len(up)/2]+up[len(up)/2:]) {
		t.Fatalf("the secret reached the sandbox: %q", res.Stdout)
	}
	if n := strings.Count(res.Stdout, "[SECRET:GH]"); n != 5 {
		t.Errorf("%d redactions in %q, want 5 (stdout and stderr of the first call, stderr of the second, two errors)", n, res.Stdout)
	}
	if len(res.Calls) != 2 {
		t.Fatalf("calls: %+v", res.Calls)
	}
	for _, c := range res.Calls {
		if strings.Contains(c.Error, secretValue) || !strings.Contains(c.Error, "[secret:gh]") {
			t.Errorf("record error %q", c.Error)
		}
		if len(c.Events) != 1 || strings.Contains(string(c.Events[0]), secretValue) || !strings.Contains(string(c.Events[0]), "[secret:gh]") {
			t.Errorf("record events %s", c.Events)
		}
	}
	if a := audit.String(); strings.Contains(a, secretValue) || strings.Count(a, "[secret:gh]") != 4 {
		t.Errorf("audit log: %s", a)
	}
}

// Arguments in records and the audit log are redacted (a gate's
// arguments are the sandbox's, but a record may reach a log a person
// reads).
func TestRecordArgsRedacted(t *testing.T) {
	audit := &lockedBuffer{}
	res := run(t, Config{Redact: testRedact(), Audit: audit}, `t_echo "x`+secretValue+`" >/dev/null`)
	if len(res.Calls) != 1 || res.Calls[0].Args[0] != "x[secret:gh]" {
		t.Fatalf("calls: %+v", res.Calls)
	}
	if strings.Contains(audit.String(), secretValue) {
		t.Errorf("audit log: %s", audit.String())
	}
}

// The sandboxed command's own output (live, captured, and its answer) is
// redacted too, also split across writes: with the local backend a
// command runs as gatebridge's user and can read what gatebridge can.
func TestCommandOutputRedacted(t *testing.T) {
	half := len(secretValue) / 2
	cfg := Config{Gates: testRegistry(t), Redact: testRedact(), Dir: t.TempDir()}
	var live bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Run(ctx, cfg, shBackend{}, sandbox.Spec{
		Command:   []string{"sh", "-c", `printf '%s' "$A"; sleep 0.1; printf '%s\n' "$B"; t_submit "$A$B"`},
		Env:       []string{"A=" + secretValue[:half], "B=" + secretValue[half:]},
		Workspace: t.TempDir(), Stdout: &live,
	})
	if err != nil {
		t.Fatal(err)
	}
	for what, got := range map[string]string{"live": live.String(), "captured": res.Stdout, "answer": *res.Answer} {
		if strings.Contains(got, secretValue) || !strings.Contains(got, "[secret:gh]") {
			t.Errorf("%s output: %q", what, got)
		}
	}
}

// The sandbox chooses how much comes before a secret in an argument, or
// names a gate after it: the record (process/exited's gateCalls, the
// audit log) cuts each argument at 256 bytes and the unknown gate's name
// in its error at 64, and a cut made before redaction kept the secret's
// first bytes, out of the redactor's reach. Every offset is tried.
func TestRecordCutLeavesNoPartialSecret(t *testing.T) {
	audit := &lockedBuffer{}
	d, err := NewDispatcher(Config{Gates: testRegistry(t), Redact: testRedact(), Audit: audit}, "s")
	if err != nil {
		t.Fatal(err)
	}
	prefix := secretValue[:8] // the start of the value, never shown
	var recs []CallRecord
	for pad := 256 - len(secretValue); pad <= 256; pad++ {
		arg := strings.Repeat("a", pad) + secretValue
		for _, req := range []*Request{{ID: "e", Gate: "t_echo", Args: []string{arg}}, {ID: "u", Gate: "no_such_" + arg}, {ID: "n", Gate: secretValue}} {
			resp := d.Dispatch(context.Background(), req)
			d.Record(resp.Record)
			recs = append(recs, resp.Record)
		}
	}
	for _, r := range recs {
		for _, s := range append([]string{r.Gate, r.Error}, r.Args...) {
			if strings.Contains(s, prefix) {
				t.Fatalf("a record holds the secret's first bytes: %q", s)
			}
		}
	}
	if strings.Contains(audit.String(), prefix) {
		t.Fatal("the audit log holds the secret's first bytes")
	}
}
