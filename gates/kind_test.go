package gates_test

import (
	"strings"
	"testing"

	"github.com/gatebridge/gatebridge/gates"
)

func TestKinds(t *testing.T) {
	ks := gates.Kinds()
	if len(ks) != 2 || ks[0].Name != gates.KindBuiltin || ks[1].Name != gates.KindCommand {
		t.Fatalf("kinds = %+v", ks)
	}
	for _, k := range ks {
		if k.Summary == "" || k.New == nil || k.Settings == "" {
			t.Errorf("kind %s incomplete", k.Name)
		}
	}
	ks[0].Name = "changed"
	if gates.Kinds()[0].Name != gates.KindBuiltin {
		t.Error("Kinds returned the package's own slice")
	}

	b, _ := gates.LookupKind(gates.KindBuiltin)
	gs, err := b.New(gates.Options{Root: t.TempDir()})
	if err != nil || len(gs) == 0 {
		t.Fatalf("builtin New = %v, %v", gs, err)
	}
	c, _ := gates.LookupKind(gates.KindCommand)
	gs, err = c.New(gates.CommandSpec{Name: "gb_true", Command: []string{"true"}})
	if err != nil || len(gs) != 1 || gs[0].Spec().Name != "gb_true" {
		t.Fatalf("command New = %v, %v", gs, err)
	}
	// The kind validates: a command gate with a bad name is refused.
	if _, err := c.New(gates.CommandSpec{Name: "../x", Command: []string{"true"}}); err == nil {
		t.Error("command gate named ../x accepted")
	}
	// Settings of another kind are an error naming both types.
	if _, err := c.New(gates.Options{}); err == nil || !strings.Contains(err.Error(), "gates.Options") || !strings.Contains(err.Error(), "gates.CommandSpec") {
		t.Errorf("wrong settings: %v", err)
	}
	if _, err := gates.LookupKind("mcp"); err == nil || !strings.Contains(err.Error(), `"mcp"`) || !strings.Contains(err.Error(), "builtin, command") {
		t.Errorf("LookupKind(mcp) = %v", err)
	}
}
