//go:build unix

package gates

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// helpOf is what the dispatcher prints for g --help, or "" when the call
// is not a help request.
func helpOf(g Gate, args ...string) string {
	if !WantsHelp(g, args) {
		return ""
	}
	var b bytes.Buffer
	WriteHelp(&b, g)
	return b.String()
}

// "--help" or "-h" alone asks any gate for its usage, except a gate that
// takes it itself: gb_echo (prints it), a command gate whose policy allows
// it (the command's own help), an MCP tool (its own text).
func TestWantsHelp(t *testing.T) {
	_, gs := fixture(t, Options{WritableRoot: t.TempDir()})
	for _, name := range []string{"read_file", "list_dir", "search", "write_file", "submit"} {
		for _, arg := range []string{"--help", "-h"} {
			h := helpOf(gs[name], arg)
			if !strings.HasPrefix(h, "usage: "+gs[name].Spec().Usage+"\n") {
				t.Errorf("%s %s: help %q", name, arg, h)
			}
		}
	}
	rf := helpOf(gs["read_file"], "--help")
	for _, want := range []string{
		"\nparameters:\n",
		"  offset (option --offset VALUE, integer): Start at line N, counted from 1",
		"  path (required): File;",
		`read_file '{"path":"…"}'`,
	} {
		if !strings.Contains(rf, want) {
			t.Errorf("read_file --help lacks %q:\n%s", want, rf)
		}
	}
	if h := helpOf(gs["submit"], "--help"); strings.Contains(h, "may also come as one JSON object") {
		t.Errorf("submit takes JSON as an answer, its help must not offer it as parameters:\n%s", h)
	}
	for _, args := range [][]string{{"--help", "a.txt"}, {"a.txt", "-h"}, {"--helpx"}, {"help"}} {
		if helpOf(gs["read_file"], args...) != "" {
			t.Errorf("read_file %q taken for a help request", args)
		}
	}
	if helpOf(gs["gb_echo"], "--help") != "" || callGate(t, gs["gb_echo"], nil, "--help").out != "--help\n" {
		t.Error("gb_echo --help must print --help")
	}

	opts := mustCommand(t, CommandSpec{Name: "du_h", Command: []string{"echo"}, Options: []OptionRule{{Name: "-h"}, {Name: "-s"}}})
	if helpOf(opts, "-h") != "" {
		t.Error("a command gate whose policy allows -h must get it")
	}
	if h := helpOf(opts, "--help"); !strings.Contains(h, "usage: du_h [-h] [-s]") || !strings.Contains(h, "-h (flag -h): Flag.") {
		t.Errorf("du_h --help: %q", h)
	}
	legacy := mustCommand(t, CommandSpec{Name: "any", Command: []string{"echo"}, AllowPattern: ".*"})
	if helpOf(legacy, "--help") != "" {
		t.Error("a legacy command gate that allows --help must get it")
	}
	strict := mustCommand(t, CommandSpec{Name: "strict", Command: []string{"echo"}, AllowArgs: []string{"x"}})
	if !strings.HasPrefix(helpOf(strict, "--help"), "usage: strict [ARGS...]\n") {
		t.Error("strict --help: no usage")
	}
}

// schemaGate is a gate whose params come from a JSON Schema, as a runtime
// gate's do.
type schemaGate struct {
	Gate
	schema json.RawMessage
}

func (g schemaGate) InputSchema() json.RawMessage { return g.schema }

func newSchemaGate(t *testing.T, schema string) Gate {
	ps, err := ParamsOfSchema(json.RawMessage(schema))
	if err != nil {
		t.Fatal(err)
	}
	g := Func(Spec{Name: "rt", Params: ps, Usage: UsageOf("rt", ps)}, func(context.Context, *Call) (int, error) { return 0, nil })
	return schemaGate{g, json.RawMessage(schema)}
}

func TestParamArgs(t *testing.T) {
	_, gs := fixture(t, Options{})
	show := mustCommand(t, CommandSpec{Name: "show", Command: []string{"printf", "<%s>"},
		Options:      []OptionRule{{Name: "-n", Value: "[0-9]+"}, {Name: "--oneline"}},
		Args:         []ArgRule{{Name: "REV", Pattern: "[A-Za-z0-9_.-]+"}, {Name: "PATH", Pattern: "[a-z/.-]+", Optional: true, Variadic: true, Max: 3}},
		EndOfOptions: "--end-of-options"})
	legacy := mustCommand(t, CommandSpec{Name: "legacy", Command: []string{"echo"}, AllowArgs: []string{"--oneline", "x"}})
	rt := newSchemaGate(t, `{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer"},"exact":{"type":"boolean"}},"required":["query"]}`)
	const plain = "plain" // the arguments come back as they are
	for _, tc := range []struct {
		g    Gate
		arg  string
		want []string // nil: plain
		err  string
	}{
		{gs["read_file"], `{"path":"f.txt","offset":2}`, []string{"--offset", "2", "f.txt"}, ""},
		{gs["read_file"], ` {"path": "f.txt", "limit": 1, "offset": null} `, []string{"--limit", "1", "f.txt"}, ""},
		{gs["read_file"], `{"path":"-dash"}`, []string{"--", "-dash"}, ""},
		{gs["search"], `{"pattern":"needle"}`, []string{"needle"}, ""},
		{gs["search"], `{"pattern":"x","path":"sub"}`, []string{"x", "sub"}, ""},
		{gs["search"], `{"path":"sub"}`, nil, `search: JSON parameters: "path" is given but "pattern" before it is not`},
		{gs["read_file"], `{"path":"a\u0000b"}`, nil, "NUL"},
		// Not parameters: a key that is not one, nothing, not an object,
		// something after it, bytes JSON cannot hold, raw gates.
		{gs["read_file"], `{"path":"f.txt","bogus":1}`, nil, plain},
		{gs["read_file"], `{}`, nil, plain},
		{gs["read_file"], `{`, nil, plain},
		{gs["read_file"], `["f.txt"]`, nil, plain},
		{gs["read_file"], `{"path":"f.txt"} x`, nil, plain},
		{gs["read_file"], `{"path":"f.txt"}{"path":"g"}`, nil, plain},
		{gs["read_file"], "{\"path\":\"\xff\"}", nil, plain},
		{gs["submit"], `{"score":3}`, nil, plain},
		{gs["submit"], `{"answer":"x"}`, nil, plain},
		{gs["gb_echo"], `{"arg":"x"}`, nil, plain},
		// Command gates: options by their names, a boolean flag alone
		// when true, a variadic one from an array, in params order.
		{show, `{"REV":"HEAD","-n":5,"--oneline":true,"PATH":["a","b"]}`, []string{"--oneline", "-n", "5", "HEAD", "a", "b"}, ""},
		{show, `{"REV":"HEAD","--oneline":false}`, []string{"HEAD"}, ""},
		{show, `{"REV":"HEAD","--oneline":"yes"}`, nil, `"--oneline" is a flag: want true or false`},
		{show, `{"rev":"HEAD"}`, nil, plain},
		// Runtime gates: required params first, so an optional one left
		// out leaves no gap.
		// allow_args gates take "--" as an argument: none is added.
		{legacy, `{"ARGS":["--oneline","x"]}`, []string{"--oneline", "x"}, ""},
		{rt, `{"query":"go"}`, []string{"go"}, ""},
		{rt, `{"query":"-x"}`, []string{"-x"}, ""},
		{rt, `{"query":"go","limit":3,"exact":true}`, []string{"go", "true", "3"}, ""},
		{rt, `{"query":"go","limit":3}`, nil, `"limit" is given but "exact" before it is not`},
	} {
		got, ok, err := ParamArgs(tc.g, []string{tc.arg})
		name := tc.g.Spec().Name + " " + tc.arg
		switch {
		case tc.err == plain:
			if ok || err != nil || !slices.Equal(got, []string{tc.arg}) {
				t.Errorf("%s: got %q ok=%v err=%v, want the argument as it is", name, got, ok, err)
			}
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) || ExitCodeOf(0, err) != ExitUsage {
				t.Errorf("%s: err %v, want a usage error with %q", name, err, tc.err)
			}
		default:
			if !ok || err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("%s: got %q ok=%v err=%v, want %q", name, got, ok, err, tc.want)
			}
		}
	}
	// Two arguments are never parameters.
	if got, ok, _ := ParamArgs(gs["read_file"], []string{`{"path":"a.txt"}`, "x"}); ok || len(got) != 2 {
		t.Errorf("two arguments converted: %q", got)
	}
}

// The words a JSON object becomes are what the gate runs with.
func TestParamArgsRun(t *testing.T) {
	_, gs := fixture(t, Options{})
	for _, tc := range []struct {
		gate, arg, out string
	}{
		{"read_file", `{"path":"a.txt","offset":2}`, "two needle\nthree\n"},
		{"read_file", `{"path":"a.txt","offset":2,"limit":1}`, "two needle\n"},
		{"read_file", `{"path":"-dash"}`, "dash\n"},
		{"search", `{"pattern":"needle","path":"a.txt"}`, "a.txt:2:two needle\n"},
		{"list_dir", `{"path":"sub"}`, "b.go\ndeep/\n"},
	} {
		args, ok, err := ParamArgs(gs[tc.gate], []string{tc.arg})
		if !ok || err != nil {
			t.Fatalf("%s %s: ok=%v err=%v", tc.gate, tc.arg, ok, err)
		}
		callGate(t, gs[tc.gate], nil, args...).check(t, 0, tc.out, "")
	}
}

// The schema a model is given names the keys ParamArgs takes, typed.
func TestSchemaOfBuiltins(t *testing.T) {
	_, gs := fixture(t, Options{})
	var s struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(SchemaOf(gs["read_file"]), &s); err != nil {
		t.Fatal(err)
	}
	if s.Properties["offset"].Type != "integer" || s.Properties["limit"].Type != "integer" || s.Properties["path"].Type != "string" ||
		!slices.Equal(s.Required, []string{"path"}) || len(s.Properties) != 3 {
		t.Errorf("read_file schema %+v", s)
	}
}
