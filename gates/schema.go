package gates

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// ParamsOfSchema documents the properties of an object's JSON Schema as
// params, for usage lines and --help: gates whose parameters come as a
// schema (registered over the protocol, tools of MCP servers). Required
// properties come first, then the others, each sorted by name: the order
// in which [ParamArgs] passes them as positional words, so that an
// optional one left out leaves no gap before a required one.
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
	sort.Slice(names, func(i, j int) bool {
		if req[names[i]] != req[names[j]] {
			return req[names[i]]
		}
		return names[i] < names[j]
	})
	out := make([]Param, 0, len(names))
	for _, n := range names {
		var prop struct {
			Description string `json:"description"`
			Type        any    `json:"type"`
		}
		json.Unmarshal(s.Properties[n], &prop)
		out = append(out, Param{Name: n, Description: prop.Description, Required: req[n], Type: schemaType(prop.Type)})
	}
	return out, nil
}

// schemaType is the one JSON Schema type a param documents: t itself, the
// first that is not "null" of a list (["integer", "null"]); "" for a
// string or anything else.
func schemaType(t any) string {
	if ts, ok := t.([]any); ok {
		t = nil
		for _, x := range ts {
			if x != "null" {
				t = x
				break
			}
		}
	}
	switch t {
	case "integer", "number", "boolean", "array", "object":
		return t.(string)
	}
	return ""
}

// UsageOf is a usage line for a gate with params: required ones in
// capitals, optional ones in brackets, options as "--NAME VALUE" (a
// boolean one as "--NAME").
func UsageOf(name string, ps []Param) string {
	var b strings.Builder
	b.WriteString(name)
	for _, p := range ps {
		n := strings.ToUpper(p.Name)
		if o := p.Option(); o != "" {
			n = o
			if p.Type != "boolean" {
				n += " VALUE"
			}
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

// SchemaOf is the JSON Schema of g's parameters: its own when it has one
// ([Schemer]), else made from its params: each a string unless its Type
// says otherwise (a variadic one an array of strings), required ones
// required. Its property names are the keys [ParamArgs] takes.
func SchemaOf(g Gate) json.RawMessage {
	if s, ok := g.(Schemer); ok && len(s.InputSchema()) > 0 {
		return s.InputSchema()
	}
	props := map[string]any{}
	required := []string{}
	for _, p := range g.Spec().Params {
		var prop map[string]any
		switch {
		case p.Variadic:
			prop = map[string]any{"type": "array", "items": map[string]any{"type": "string"}}
		case p.Type != "":
			prop = map[string]any{"type": p.Type}
		default:
			prop = map[string]any{"type": "string"}
		}
		if p.Description != "" {
			prop["description"] = p.Description
		}
		props[p.Name] = prop
		if p.Required {
			required = append(required, p.Name)
		}
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": required})
	return b
}

// ToolFormats are the formats [ToolDefs] knows.
var ToolFormats = []string{"json-schema", "openai", "anthropic", "mcp"}

// ToolDefs describes every gate in reg as a tool definition in the shape
// an API takes, sorted by name: json-schema {name, description, schema},
// openai {type: function, function: {name, description, parameters}},
// anthropic {name, description, input_schema}, mcp {name, description,
// inputSchema}. The description is the summary, then the usage line; the
// schema is [SchemaOf]. The error names an unknown format.
func ToolDefs(reg *Registry, format string) ([]any, error) {
	if !slices.Contains(ToolFormats, format) {
		return nil, fmt.Errorf("gates: unknown tool format %q (formats: %s)", format, strings.Join(ToolFormats, ", "))
	}
	out := []any{}
	for _, spec := range reg.Specs() {
		g, err := reg.Lookup(spec.Name)
		if err != nil {
			continue // unregistered meanwhile
		}
		desc := spec.Summary
		if spec.Usage != "" {
			desc += " Usage: " + spec.Usage
		}
		schema := SchemaOf(g)
		switch format {
		case "json-schema":
			out = append(out, map[string]any{"name": spec.Name, "description": desc, "schema": schema})
		case "openai":
			out = append(out, map[string]any{"type": "function", "function": map[string]any{"name": spec.Name, "description": desc, "parameters": schema}})
		case "anthropic":
			out = append(out, map[string]any{"name": spec.Name, "description": desc, "input_schema": schema})
		case "mcp":
			out = append(out, map[string]any{"name": spec.Name, "description": desc, "inputSchema": schema})
		}
	}
	return out, nil
}

// Doc is one gate as `gatebridge gates --format json` prints it: ready to
// hand to a model as a tool description.
type Doc struct {
	Name    string  `json:"name"`
	Summary string  `json:"summary"`
	Usage   string  `json:"usage"`
	Params  []Param `json:"params"`
	Stdin   string  `json:"stdin"`
	Kind    string  `json:"kind"` // builtin, command, http, mcp: the kind that made it
}

// Docs describes every gate of reg, in its order; kindOf is each gate's
// kind (by name), as KindRegistry.Build says.
func Docs(reg *Registry, kindOf map[string]string) []Doc {
	specs := reg.Specs()
	docs := make([]Doc, len(specs))
	for i, s := range specs {
		p := s.Params
		if p == nil {
			p = []Param{}
		}
		docs[i] = Doc{s.Name, s.Summary, s.Usage, p, s.Stdin.String(), kindOf[s.Name]}
	}
	return docs
}
