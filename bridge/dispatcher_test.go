package bridge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

// A transport that can stream gets the gate's output as it is written,
// not when the gate returns; the cap still holds.
func TestDispatchStreams(t *testing.T) {
	release := make(chan struct{})
	reg := gates.NewRegistry()
	reg.MustRegister(gates.Func(gates.Spec{Name: "t_stream"}, func(ctx context.Context, c *gates.Call) (int, error) {
		fmt.Fprintln(c.Stdout, "first")
		<-release
		fmt.Fprintln(c.Stdout, strings.Repeat("x", 100))
		return 0, nil
	}))
	d, err := NewDispatcher(Config{Gates: reg, Limits: Limits{MaxOutputBytes: 50}}, "s")
	if err != nil {
		t.Fatal(err)
	}
	var out sandboxtest.Buffer
	done := make(chan *Response)
	go func() { done <- d.Dispatch(context.Background(), &Request{ID: "1", Gate: "t_stream", Stdout: &out}) }()
	if !sandboxtest.Poll(5*time.Second, func() bool { return out.String() == "first\n" }) {
		t.Fatalf("first line not streamed while the gate runs: %q", out.String())
	}
	close(release)
	resp := <-done
	if got := out.String(); len(got) != 50 || !strings.HasPrefix(got, "first\nxxx") {
		t.Errorf("streamed %q (%d bytes), want the first 50", got, len(got))
	}
	if len(resp.Stdout) != 0 || !strings.Contains(string(resp.Stderr), "output truncated") {
		t.Errorf("response stdout %q stderr %q", resp.Stdout, resp.Stderr)
	}
}

// The approval hook sees every call before its gate runs; a refusal is
// exit 126, decision denied, and the gate never runs.
func TestApprovalHook(t *testing.T) {
	ran := false
	reg := gates.NewRegistry()
	reg.MustRegister(gates.Func(gates.Spec{Name: "t_rm"}, func(ctx context.Context, c *gates.Call) (int, error) {
		ran = true
		return 0, nil
	}))
	var asked []string
	cfg := Config{Gates: reg, Approve: func(ctx context.Context, spec gates.Spec, req *Request) error {
		asked = append(asked, spec.Name+" "+strings.Join(req.Args, " "))
		if len(req.Args) > 0 && req.Args[0] == "/" {
			return errors.New("the user said no")
		}
		return nil
	}}
	res := run(t, cfg, `t_rm /; echo "rc=$?"; t_rm tmp; echo "rc=$?"`)
	if res.Stdout != "rc=126\nrc=0\n" || !strings.Contains(res.Stderr, "gatebridge: t_rm: not approved: the user said no") {
		t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	if len(asked) != 2 || res.Calls[0].Decision != DecisionDenied || res.Calls[1].Decision != DecisionRan {
		t.Errorf("asked %q, calls %+v", asked, res.Calls)
	}
	if !ran {
		t.Error("approved call did not run")
	}
}

// A wrapper killed while its gate runs (timeout 1 gate, Ctrl-C, the
// command's own kill) no longer leaves the gate running on the host until
// its own timeout: the host sees the wake FIFO lose its reader and cancels
// the gate's context.
func TestCallerGoneCancelsGate(t *testing.T) {
	for _, tc := range []struct{ name, wake, sig, rc string }{
		{"fifo-kill", "fifo", "KILL", "137"}, // no trap can run: the FIFO tells
		{"fifo-term", "fifo", "TERM", "143"},
		{"poll-term", "poll", "TERM", "143"}, // no FIFO: the cancel marker tells
		{"poll-hup", "poll", "HUP", "129"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cancelled := make(chan time.Time, 1)
			reg := gates.NewRegistry()
			reg.MustRegister(gates.Func(gates.Spec{Name: "t_wait", Timeout: time.Minute}, func(ctx context.Context, c *gates.Call) (int, error) {
				<-ctx.Done()
				cancelled <- time.Now()
				return 0, ctx.Err()
			}))
			kill := make(chan time.Time, 1)
			reg.MustRegister(gates.Func(gates.Spec{Name: "t_mark"}, func(ctx context.Context, c *gates.Call) (int, error) {
				kill <- time.Now()
				return 0, nil
			}))
			res := run(t, Config{Gates: reg}, `GATEBRIDGE_WAKE=`+tc.wake+` t_wait & p=$!
while [ -z "$(ls "$GATEBRIDGE_CALLS_DIR"/*/ready 2>/dev/null)" ]; do sleep 0.01; done; sleep 0.2
t_mark; kill -`+tc.sig+` $p; wait $p; echo "rc=$?"`)
			var at, killed time.Time
			select {
			case at = <-cancelled:
				killed = <-kill
			default:
				t.Fatalf("gate not cancelled when its caller was killed (stdout %q)", res.Stdout)
			}
			// The bound is loose (a shared machine); the figure is logged.
			t.Logf("cancelled %v after the caller was signalled", at.Sub(killed))
			if took := at.Sub(killed); took > 5*time.Second {
				t.Errorf("cancelled %v after the caller went away", took)
			}
			var rec *CallRecord
			for i := range res.Calls {
				if res.Calls[i].Gate == "t_wait" {
					rec = &res.Calls[i]
				}
			}
			if res.Stdout != "rc="+tc.rc+"\n" || rec == nil || rec.Decision != DecisionCanceled ||
				!strings.Contains(rec.Error, "caller went away") {
				t.Errorf("stdout %q calls %+v", res.Stdout, res.Calls)
			}
		})
	}
}

// Gates registered after Open get a wrapper at once, and removed ones lose
// it: a protocol client registers gates while sessions live.
func TestLateRegistration(t *testing.T) {
	reg := testRegistry(t)
	s, err := Open(Config{Gates: reg, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := reg.Register(echoGate("t_late")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.Dirs().Bin, "t_late")); err != nil {
		t.Fatalf("no wrapper for a gate registered after Open: %v", err)
	}
	res, err := s.Run(context.Background(), shBackend{}, sandbox.Spec{Command: []string{"sh", "-c", "t_late hi"}})
	if err != nil || res.Stdout != "hi\n" {
		t.Fatalf("%v %+v", err, res)
	}
	if err := reg.Unregister("t_late"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.Dirs().Bin, "t_late")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("wrapper of an unregistered gate still there: %v", err)
	}
	res, err = s.Run(context.Background(), shBackend{}, sandbox.Spec{Command: []string{"sh", "-c", `"$GATEBRIDGE_SESSION_DIR/bin/t_echo" x; t_late hi; echo "rc=$?"`}})
	if err != nil || !strings.HasSuffix(res.Stdout, "rc=127\n") {
		t.Fatalf("%v %+v", err, res)
	}
}
