package approval

import (
	"context"
	"testing"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/gates"
)

// The call record says who decided (issue 31: gate calls reported with
// their decision): the runtime that answered, the config that refused,
// and no one for a gate that asks nobody.
func TestCallRecordDecidedBy(t *testing.T) {
	reg := gates.NewRegistry()
	if err := reg.Register(gitLog(t)); err != nil {
		t.Fatal(err)
	}
	settings := map[string]Setting{"git_log": Ask}
	a := &answerer{fn: func(context.Context, *Request) (Answer, error) { return Answer{Allow: true, By: ByRuntime}, nil }}
	dec := New(Config{Approver: a, Settings: settings})
	d, err := bridge.NewDispatcher(bridge.Config{Gates: reg, Approve: dec.ApproveFunc(reg, "/ws", func() string { return "s1" })}, "s1")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if rec := d.Dispatch(ctx, &bridge.Request{ID: "1", Gate: "git_log", Args: []string{"-n", "1"}}).Record; rec.DecidedBy != ByRuntime || rec.Decision != bridge.DecisionRan {
		t.Errorf("allowed by the runtime: %+v", rec)
	}
	settings["git_log"] = Deny
	if rec := d.Dispatch(ctx, &bridge.Request{ID: "2", Gate: "git_log"}).Record; rec.DecidedBy != ByConfig || rec.Decision != bridge.DecisionDenied {
		t.Errorf("denied by the config: %+v", rec)
	}
	settings["git_log"] = Never
	if rec := d.Dispatch(ctx, &bridge.Request{ID: "3", Gate: "git_log"}).Record; rec.DecidedBy != "" {
		t.Errorf("no approval asked: %+v", rec)
	}
}
