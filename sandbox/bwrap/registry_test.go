package bwrap_test

import (
	"slices"
	"testing"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/bwrap"
)

// bwrap is offered only by a program that registers it; its entry is
// complete, and its constructor reads Path and ReadOnly from the settings.
func TestRegister(t *testing.T) {
	reg := sandbox.NewRegistry()
	if err := bwrap.Register(reg); err != nil {
		t.Fatal(err)
	}
	if err := bwrap.Register(reg); err == nil {
		t.Error("registering bwrap twice succeeded")
	}
	e, err := reg.Lookup(bwrap.Name)
	if err != nil {
		t.Fatal(err)
	}
	if e.Summary == "" || e.Isolates == "" || e.New == nil || e.Available == nil || e.Doctor == nil || e.Strength != 1 {
		t.Errorf("entry is incomplete: %+v", e)
	}
	b, err := e.New(sandbox.Settings{})
	if err != nil || b.Name() != bwrap.Name {
		t.Fatalf("New = %v, %v", b, err)
	}
	b, err = e.New(sandbox.Settings{Extra: map[string]any{bwrap.Name: bwrap.Backend{Path: "/opt/bwrap", ReadOnly: []string{"/opt/tools"}, Hostname: "ignored"}}})
	if err != nil {
		t.Fatal(err)
	}
	if bb := b.(*bwrap.Backend); bb.Path != "/opt/bwrap" || !slices.Equal(bb.ReadOnly, []string{"/opt/tools"}) || bb.Hostname != "" {
		t.Errorf("New from settings = %+v", bb)
	}
}
