package local_test

import (
	"context"
	"testing"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/local"
)

// local is offered only by a program that registers it; its entry is
// complete, unsandboxed (strength 0), and makes the backend.
func TestRegister(t *testing.T) {
	reg := sandbox.NewRegistry()
	if err := local.Register(reg); err != nil {
		t.Fatal(err)
	}
	if err := local.Register(reg); err == nil {
		t.Error("registering local twice succeeded")
	}
	e, err := reg.Lookup(local.Name)
	if err != nil {
		t.Fatal(err)
	}
	if e.Summary == "" || e.Isolates == "" || e.New == nil || e.Doctor == nil || e.Strength != 0 {
		t.Errorf("entry is incomplete or isolating: %+v", e)
	}
	b, err := e.New(sandbox.Settings{})
	if err != nil || b.Name() != local.Name {
		t.Fatalf("New = %v, %v", b, err)
	}
	if err := e.Usable(context.Background(), b); err != nil {
		t.Errorf("Usable = %v", err)
	}
}
