package control_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/gates/secrets"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/local"
)

// reportHost is a host whose sandboxes offer two gates, one that
// succeeds and one that fails, and redact the secret "hunter2-secret".
func reportHost(t *testing.T, maxCalls int) *control.Host {
	t.Helper()
	reg := sandbox.NewRegistry()
	if err := local.Register(reg); err != nil {
		t.Fatal(err)
	}
	red := secrets.NewRedactor()
	red.Add("TOKEN", "hunter2-secret")
	return control.New(control.Options{Backends: reg, Process: sandbox.Spec{KillGrace: 500 * time.Millisecond}, Logf: t.Logf,
		MaxGateCalls: maxCalls, Bridge: bridge.Config{Redact: red},
		Gates: func(string, string, bool) (*gates.Registry, map[string]string, error) {
			r := gates.NewRegistry()
			r.MustRegister(gates.Func(gates.Spec{Name: "g_ok"}, func(_ context.Context, c *gates.Call) (int, error) {
				fmt.Fprintf(c.Stdout, "%d args\n", len(c.Args))
				return 0, nil
			}))
			r.MustRegister(gates.Func(gates.Spec{Name: "g_fail"}, func(_ context.Context, c *gates.Call) (int, error) {
				return 0, &gates.ExitError{Code: 3, Err: errors.New("broke on " + strings.Join(c.Args, " "))}
			}))
			return r, map[string]string{"g_ok": gates.KindBuiltin, "g_fail": gates.KindBuiltin}, nil
		}})
}

// A process's exit lists the gate calls its command made (issue 31), in
// order, with their exit codes and decisions; an argument that is not
// UTF-8 keeps its exact bytes; a secret in an argument or an error is
// redacted; OnGateCall sees each call before the exit.
func TestProcessGateCalls(t *testing.T) {
	sb := open(t, reportHost(t, 0), control.SandboxSpec{})
	var mu sync.Mutex
	var seen []bridge.CallRecord
	p, err := sb.Start(context.Background(), control.ProcessSpec{ID: "p",
		Script: `g_ok "$(printf 'caf\351')" b; g_fail x hunter2-secret; echo rc=$?`,
		OnGateCall: func(r bridge.CallRecord) {
			mu.Lock()
			seen = append(seen, r)
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	ex := wait(t, p)
	if ex.Code != 0 || len(ex.GateCalls) != 2 || ex.GateCallsDropped != 0 {
		t.Fatalf("exit %+v", ex)
	}
	ok, fail := ex.GateCalls[0], ex.GateCalls[1]
	if ok.Gate != "g_ok" || ok.ExitCode != 0 || ok.Decision != bridge.DecisionRan || len(ok.Args) != 2 ||
		len(ok.ArgsBase64) != 2 || string(ok.ArgsBase64[0]) != "caf\xe9" || ok.ArgsBase64[1] != nil || ok.Args[1] != "b" {
		t.Errorf("first call %+v", ok)
	}
	if fail.Gate != "g_fail" || fail.ExitCode != 3 || fail.Decision != bridge.DecisionRan ||
		strings.Join(fail.Args, " ") != "x [secret:TOKEN]" || fail.Error != "broke on x [secret:TOKEN]" {
		t.Errorf("second call %+v", fail)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[1].Gate != "g_fail" || strings.Contains(fmt.Sprint(seen), "hunter2") {
		t.Errorf("OnGateCall saw %+v", seen)
	}
	if s := p.Snapshot(); len(s.Exit.GateCalls) != 2 {
		t.Errorf("snapshot exit %+v", s.Exit)
	}
}

// Options.MaxGateCalls caps what an exit carries; the rest are counted.
func TestProcessGateCallsCap(t *testing.T) {
	sb := open(t, reportHost(t, 2), control.SandboxSpec{})
	var mu sync.Mutex
	seen := 0
	p, err := sb.Start(context.Background(), control.ProcessSpec{ID: "p", Script: `for i in 1 2 3 4 5; do g_ok $i; done`,
		OnGateCall: func(bridge.CallRecord) { mu.Lock(); seen++; mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	ex := wait(t, p)
	if len(ex.GateCalls) != 2 || ex.GateCallsDropped != 3 || ex.GateCalls[1].Args[0] != "2" {
		t.Fatalf("exit %+v", ex)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen != 5 {
		t.Fatalf("OnGateCall saw %d calls, want all 5", seen)
	}
}

// A process that made no gate call has an empty list, not nil.
func TestProcessNoGateCalls(t *testing.T) {
	sb := open(t, reportHost(t, 0), control.SandboxSpec{})
	p, err := sb.Start(context.Background(), control.ProcessSpec{ID: "p", Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if ex := wait(t, p); ex.GateCalls == nil || len(ex.GateCalls) != 0 {
		t.Fatalf("exit %+v", ex)
	}
}
