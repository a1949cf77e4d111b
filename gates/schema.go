package gates

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// ParamsOfSchema documents the properties of an object's JSON Schema as
// params (sorted by name), for usage lines and --help: gates whose
// parameters come as a schema (registered over the protocol, tools of MCP
// servers).
func ParamsOfSchema(schema json.RawMessage) ([]Param, error) {
	var s struct {
		Type       any                        `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.NewDecoder(bytes.NewReader(schema)).Decode(&s); err != nil {
		return nil, fmt.Errorf("not a JSON Schema object: %v", err)
	}
	if s.Type != nil && s.Type != "object" {
		return nil, fmt.Errorf("type %v: a gate's input schema must describe an object", s.Type)
	}
	req := map[string]bool{}
	for _, r := range s.Required {
		req[r] = true
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]Param, 0, len(names))
	for _, n := range names {
		var prop struct {
			Description string `json:"description"`
		}
		json.Unmarshal(s.Properties[n], &prop)
		out = append(out, Param{Name: n, Description: prop.Description, Required: req[n]})
	}
	return out, nil
}

// UsageOf is a usage line for a gate with params: required ones in
// capitals, optional ones in brackets.
func UsageOf(name string, ps []Param) string {
	var b strings.Builder
	b.WriteString(name)
	for _, p := range ps {
		n := strings.ToUpper(p.Name)
		if p.Flag {
			n = "--" + p.Name
		}
		if p.Variadic {
			n += "..."
		}
		if p.Required {
			b.WriteString(" " + n)
		} else {
			b.WriteString(" [" + n + "]")
		}
	}
	return b.String()
}
