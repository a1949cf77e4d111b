package gates_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatebridge/gatebridge/gates"
)

func TestKinds(t *testing.T) {
	kinds := gates.NewKindRegistry()
	ks := kinds.Kinds()
	if len(ks) != 2 || ks[0].Name != gates.KindBuiltin || ks[1].Name != gates.KindCommand {
		t.Fatalf("kinds = %+v", ks)
	}
	for _, k := range ks {
		if k.Summary == "" || k.New == nil || k.Settings == "" || k.Clash != gates.FailOnClash {
			t.Errorf("kind %s incomplete", k.Name)
		}
	}
	ks[0].Name = "changed"
	if kinds.Kinds()[0].Name != gates.KindBuiltin {
		t.Error("Kinds returned the registry's own slice")
	}

	ctx := context.Background()
	b, _ := kinds.Lookup(gates.KindBuiltin)
	gs, err := b.New(ctx, gates.Options{Root: t.TempDir()}, gates.Env{})
	if err != nil || len(gs) == 0 {
		t.Fatalf("builtin New = %v, %v", gs, err)
	}
	c, _ := kinds.Lookup(gates.KindCommand)
	gs, err = c.New(ctx, gates.CommandSpec{Name: "gb_true", Command: []string{"true"}, Isolate: gates.IsolateSpec{Host: true}}, gates.Env{})
	if err != nil || len(gs) != 1 || gs[0].Spec().Name != "gb_true" {
		t.Fatalf("command New = %v, %v", gs, err)
	}
	// The kind validates: a command gate with a bad name is refused.
	if _, err := c.New(ctx, gates.CommandSpec{Name: "../x", Command: []string{"true"}}, gates.Env{}); err == nil {
		t.Error("command gate named ../x accepted")
	}
	// Settings of another kind are an error naming both types.
	if _, err := c.New(ctx, gates.Options{}, gates.Env{}); err == nil || !strings.Contains(err.Error(), "gates.Options") || !strings.Contains(err.Error(), "gates.CommandSpec") {
		t.Errorf("wrong settings: %v", err)
	}
}

func newKind(name string) gates.Kind {
	return gates.Kind{Name: name, New: func(context.Context, any, gates.Env) ([]gates.Gate, error) { return nil, nil }}
}

// Registering a kind fails loudly on an empty, malformed or taken name and
// on a missing New; a lookup names what was asked and lists what exists.
func TestKindRegistry(t *testing.T) {
	kinds := gates.NewKindRegistry()
	if err := kinds.Register(newKind("http")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		k    gates.Kind
		err  string
	}{
		{"empty", newKind(""), "gates: register kind: empty name"},
		{"duplicate", newKind(gates.KindCommand), `gates: register kind "command": a kind with this name is already registered`},
		{"duplicate added", newKind("http"), `gates: register kind "http": a kind with this name is already registered`},
		{"upper case", newKind("HTTP"), `gates: register kind "HTTP": not a lower-case word`},
		{"space", newKind("a b"), "not a lower-case word"},
		{"no New", gates.Kind{Name: "x"}, `gates: register kind "x": no New`},
	} {
		if err := kinds.Register(tc.k); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
		}
	}
	var names []string
	for _, k := range kinds.Kinds() {
		names = append(names, k.Name)
	}
	if strings.Join(names, " ") != "builtin command http" {
		t.Errorf("kinds after the refusals: %v", names)
	}
	_, err := kinds.Lookup("mcp")
	if !errors.Is(err, gates.ErrUnknownKind) || err.Error() != `gates: unknown kind "mcp" (kinds: builtin, command, http)` {
		t.Errorf("Lookup(mcp) = %v", err)
	}
	if k, err := kinds.Lookup("http"); err != nil || k.Name != "http" {
		t.Errorf("Lookup(http) = %+v, %v", k, err)
	}
}

// closer is a gate that counts its Close calls.
type closer struct {
	gates.Gate
	closed *int
}

func (c closer) Close() error { *c.closed++; return nil }

// kindOf makes a kind whose New returns gates with names, each a Closer
// counting into closed.
func kindOf(clash gates.ClashPolicy, closed *int, names ...string) gates.Kind {
	return gates.Kind{Name: "test", Clash: clash, New: func(context.Context, any, gates.Env) ([]gates.Gate, error) {
		var gs []gates.Gate
		for _, n := range names {
			gs = append(gs, closer{gates.Func(gates.Spec{Name: n}, nil), closed})
		}
		return gs, nil
	}}
}

// A clash fails a FailOnClash kind with an error naming the setting "name"
// and closes the gates it did not register; a SkipOnClash kind leaves the
// gate out with a warning, and closes its gates only when it registered
// none of them (they may share one connection with those it did).
func TestKindAddClash(t *testing.T) {
	ctx := context.Background()
	taken := func() *gates.Registry {
		reg := gates.NewRegistry()
		reg.MustRegister(gates.Func(gates.Spec{Name: "a"}, nil))
		return reg
	}
	var warnings []string
	env := gates.Env{Warn: func(w string) { warnings = append(warnings, w) }}

	closed := 0
	names, err := kindOf(gates.FailOnClash, &closed, "b", "a", "c").Add(ctx, taken(), nil, env)
	var se *gates.SettingError
	if !errors.As(err, &se) || se.Field != "name" || se.Help("gates.commands[0]") != "pick another name" ||
		err.Error() != `gates: register "a": a gate with this name is already registered` {
		t.Errorf("FailOnClash: %v", err)
	}
	if strings.Join(names, " ") != "b" || closed != 2 || len(warnings) != 0 {
		t.Errorf("FailOnClash: registered %v, closed %d, warned %q", names, closed, warnings)
	}

	closed = 0
	names, err = kindOf(gates.SkipOnClash, &closed, "b", "a").Add(ctx, taken(), nil, env)
	if err != nil || strings.Join(names, " ") != "b" || closed != 0 {
		t.Errorf("SkipOnClash: registered %v, %v, closed %d", names, err, closed)
	}
	want := `tool "a" is not a gate: gates: register "a": a gate with this name is already registered`
	if len(warnings) != 1 || warnings[0] != want {
		t.Errorf("SkipOnClash warned %q, want %q", warnings, want)
	}

	warnings, closed = nil, 0
	names, err = kindOf(gates.SkipOnClash, &closed, "a", "a").Add(ctx, taken(), nil, env)
	if err != nil || len(names) != 0 || closed != 2 || len(warnings) != 2 {
		t.Errorf("SkipOnClash, all taken: registered %v, %v, closed %d, warned %q", names, err, closed, warnings)
	}
	// No Warn: the warning is dropped, not a panic.
	if _, err := kindOf(gates.SkipOnClash, &closed, "a").Add(ctx, taken(), nil, gates.Env{}); err != nil {
		t.Error(err)
	}
}

// The builtin kind takes the workspace from its Env when its settings
// name no root, and accepts absolute paths as the sandbox sees it there.
func TestBuiltinKindEnv(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "f.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	k, _ := gates.NewKindRegistry().Lookup(gates.KindBuiltin)
	reg := gates.NewRegistry()
	if _, err := k.Add(context.Background(), reg, gates.Options{WritableRoot: ws}, gates.Env{Workspace: ws, Inside: "/workspace"}); err != nil {
		t.Fatal(err)
	}
	for _, gate := range []struct{ name, arg string }{{"read_file", "/workspace/f.txt"}, {"write_file", "/workspace/g.txt"}} {
		g, err := reg.Lookup(gate.name)
		if err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		code, err := g.Call(context.Background(), &gates.Call{Args: []string{gate.arg}, Stdin: []byte("x"), Stdout: &out, Stderr: &errb})
		if code = gates.ExitCodeOf(code, err); code != 0 {
			t.Errorf("%s %s: exit %d: %v %s", gate.name, gate.arg, code, err, errb.String())
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, "g.txt")); err != nil || string(b) != "x" {
		t.Errorf("write_file through /workspace: %q, %v", b, err)
	}
}

// The command kind adds Env.Untrusted to the gate's own: a program in a
// directory the sandbox writes is refused even when the settings do not
// list that directory.
func TestCommandKindUntrusted(t *testing.T) {
	ws := t.TempDir()
	prog := filepath.Join(ws, "tool")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho planted\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	k, _ := gates.NewKindRegistry().Lookup(gates.KindCommand)
	spec := gates.CommandSpec{Name: "gb_tool", Command: []string{prog}}
	_, err := k.New(context.Background(), spec, gates.Env{Workspace: ws, Untrusted: []string{ws}})
	if err == nil || !strings.Contains(err.Error(), "which the sandbox can write") {
		t.Fatalf("a program in Env.Untrusted: %v", err)
	}
	spec.Isolate.Host = true
	if _, err := k.New(context.Background(), spec, gates.Env{}); err != nil {
		t.Fatalf("the same program, trusted: %v", err)
	}
}
