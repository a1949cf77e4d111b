package rpc

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/gates"
)

// process/exited's gateCalls carry an unknown gate's name that is not
// UTF-8 exactly (gateBase64), as they do arguments; ExactGate reads it.
func TestGateCallReportUnknownGateExact(t *testing.T) {
	d, err := bridge.NewDispatcher(bridge.Config{Gates: gates.NewRegistry()}, "s")
	if err != nil {
		t.Fatal(err)
	}
	d.Record(d.Dispatch(context.Background(), &bridge.Request{ID: "u", Gate: "no\xff"}).Record)
	recs, _ := d.Records()
	b, err := json.Marshal(gateCallReport("p1", recs[0]))
	if err != nil {
		t.Fatal(err)
	}
	var r GateCallReport
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	if _, ok := m["gateBase64"]; !ok || r.ExactGate() != "no\xff" {
		t.Errorf("report %s: the gate reads %q", b, r.ExactGate())
	}
}
