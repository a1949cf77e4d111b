package gates_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gatebridge/gatebridge/gates"
)

// Each format has its shape, the same description and schema; an unknown
// format is an error listing the known ones.
func TestToolDefs(t *testing.T) {
	reg := gates.NewRegistry()
	reg.MustRegister(gates.Func(gates.Spec{Name: "b", Summary: "Bee.", Usage: "b X"}, nil))
	reg.MustRegister(gates.Func(gates.Spec{Name: "a", Summary: "Ay."}, nil))
	want := map[string]string{
		"json-schema": `{"description":"Ay.","name":"a","schema":SCHEMA}`,
		"openai":      `{"function":{"description":"Ay.","name":"a","parameters":SCHEMA},"type":"function"}`,
		"anthropic":   `{"description":"Ay.","input_schema":SCHEMA,"name":"a"}`,
		"mcp":         `{"description":"Ay.","inputSchema":SCHEMA,"name":"a"}`,
	}
	for _, f := range gates.ToolFormats {
		defs, err := gates.ToolDefs(reg, f)
		if err != nil || len(defs) != 2 {
			t.Fatalf("%s: %v, %v", f, defs, err)
		}
		a, _ := json.Marshal(defs[0])
		b, _ := json.Marshal(defs[1])
		g, _ := reg.Lookup("a")
		if w := strings.ReplaceAll(want[f], "SCHEMA", string(gates.SchemaOf(g))); string(a) != w {
			t.Errorf("%s: %s, want %s", f, a, w)
		}
		if !strings.Contains(string(b), `"Bee. Usage: b X"`) {
			t.Errorf("%s: %s lacks the usage line", f, b)
		}
	}
	if defs, err := gates.ToolDefs(gates.NewRegistry(), "mcp"); err != nil || defs == nil || len(defs) != 0 {
		t.Errorf("no gates: %#v, %v (want an empty list, printed as [])", defs, err)
	}
	if _, err := gates.ToolDefs(reg, "xml"); err == nil || err.Error() != `gates: unknown tool format "xml" (formats: json-schema, openai, anthropic, mcp)` {
		t.Errorf("xml: %v", err)
	}
}
