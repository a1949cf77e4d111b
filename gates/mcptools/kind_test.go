package mcptools

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/gates/mcptools/mcptest"
)

// mcpKind is the mcp kind, registered as a program does.
func mcpKind(t *testing.T) gates.Kind {
	t.Helper()
	kinds := gates.NewKindRegistry()
	if err := Register(kinds); err != nil {
		t.Fatal(err)
	}
	if err := Register(kinds); err == nil {
		t.Error("mcp registered twice")
	}
	k, err := kinds.Lookup(KindMCP)
	if err != nil || k.Clash != gates.SkipOnClash || k.Summary == "" {
		t.Fatalf("Lookup(mcp) = %+v, %v", k, err)
	}
	return k
}

// The kind's gates: tools the server's text makes unsafe, and tools whose
// gate name is taken, are left out with a warning each; a server none of
// whose tools became a gate is closed (nothing else would close it).
func TestKindWarnsAndCloses(t *testing.T) {
	k := mcpKind(t)
	ctx := context.Background()

	var warnings []string
	env := gates.Env{Warn: func(w string) { warnings = append(warnings, w) }}
	reg := gates.NewRegistry()
	defer reg.Close()
	names, err := k.Add(ctx, reg, Server{Name: "evil", URL: mcptest.Serve(t, mcptest.Hostile())}, env)
	if err != nil || strings.Join(names, " ") != "evil_lookup evil_titled" {
		t.Fatalf("hostile server: gates %v, %v", names, err)
	}
	if len(warnings) != len(mcptest.Refused) {
		t.Errorf("%d warnings for %d refused tools: %q", len(warnings), len(mcptest.Refused), warnings)
	}
	for _, w := range warnings {
		if !strings.HasPrefix(w, "tool ") || !strings.Contains(w, " is not a gate: ") || mcptest.Injected(w) != "" {
			t.Errorf("warning %q", w)
		}
	}

	srv := mcp.NewServer(&mcp.Implementation{Name: "two"}, nil)
	ok := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	}
	for _, n := range []string{"x", "y"} {
		srv.AddTool(&mcp.Tool{Name: n, InputSchema: map[string]any{"type": "object"}}, ok)
	}
	// A client that closes its session sends DELETE.
	var closes atomic.Int32
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			closes.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	defer ts.Close()
	defer ts.CloseClientConnections() // a session left open would keep Close waiting
	two := Server{Name: "two", URL: ts.URL}
	waitCloses := func(n int32) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); closes.Load() != n; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the server saw %d sessions closed, want %d", closes.Load(), n)
			}
		}
	}

	// One name taken: the other gate is registered, and works.
	warnings = nil
	reg2 := gates.NewRegistry()
	reg2.MustRegister(gates.Func(gates.Spec{Name: "two_x"}, nil))
	names, err = k.Add(ctx, reg2, two, env)
	want := `tool "two_x" is not a gate: gates: register "two_x": a gate with this name is already registered`
	if err != nil || strings.Join(names, " ") != "two_y" || len(warnings) != 1 || warnings[0] != want {
		reg2.Close()
		t.Fatalf("one name taken: gates %v, %v, warnings %q", names, err, warnings)
	}
	if code, out, errb := call(t, reg2, "two_y", ""); code != 0 || out != "ok\n" {
		t.Errorf("two_y: exit %d, %q %q", code, out, errb)
	}
	reg2.Close()
	waitCloses(1)

	// Every name taken: no gate, and the server is closed.
	warnings = nil
	reg3 := gates.NewRegistry()
	defer reg3.Close()
	reg3.MustRegister(gates.Func(gates.Spec{Name: "two_x"}, nil))
	reg3.MustRegister(gates.Func(gates.Spec{Name: "two_y"}, nil))
	names, err = k.Add(ctx, reg3, two, env)
	if err != nil || len(names) != 0 || len(warnings) != 2 {
		t.Fatalf("every name taken: gates %v, %v, warnings %q", names, err, warnings)
	}
	waitCloses(2)
}

// Errors name the setting at fault, with a hint that may name the
// source's other settings.
func TestKindErrors(t *testing.T) {
	k := mcpKind(t)
	ctx := context.Background()
	url := mcptest.Serve(t, mcptest.Hostile())
	ws := t.TempDir()
	planted := filepath.Join(ws, "server")
	if err := os.WriteFile(planted, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, field, msg, help string
		s                      Server
	}{
		{"no such tool", "tools", `mcp server evil: the server has no such tool: "nosuch"`,
			"list only tools the server has (`gatebridge gates` without the list shows them)", Server{Name: "evil", URL: url, Tools: []string{"lookup", "nosuch"}}},
		{"max_tools", "max_tools", "mcp server evil: the server lists more than 3 tools",
			"name the tools to use in KEY.tools, or raise KEY.max_tools (each tool is a wrapper in every session)", Server{Name: "evil", URL: url, MaxTools: 3}},
		{"tools over max_tools", "max_tools", "mcp server evil: 2 tools are listed, more than the 1 allowed",
			"name the tools to use in KEY.tools, or raise KEY.max_tools (each tool is a wrapper in every session)", Server{Name: "evil", URL: url, MaxTools: 1, Tools: []string{"a", "b"}}},
		{"program the sandbox writes", "command", "which the sandbox can write",
			"install the MCP server where only root or you can write, outside the workspace, the writable root and the session directories", Server{Name: "p", Command: []string{planted}}},
		{"no server", "", "mcp server gone: connect:", "check that the server starts (command) or answers (url)",
			Server{Name: "gone", URL: "http://127.0.0.1:1/"}},
	} {
		reg := gates.NewRegistry()
		_, err := k.Add(ctx, reg, tc.s, gates.Env{Workspace: ws, Untrusted: []string{ws}})
		reg.Close()
		var se *gates.SettingError
		if !errors.As(err, &se) || se.Field != tc.field || !strings.Contains(err.Error(), tc.msg) || se.Help("KEY") != tc.help {
			t.Errorf("%s: %v (%+v)", tc.name, err, se)
		}
	}
	if _, err := k.New(ctx, gates.CommandSpec{}, gates.Env{}); err == nil || !strings.Contains(err.Error(), "want mcptools.Server") {
		t.Errorf("wrong settings: %v", err)
	}
}

// A tool list cached where the sandbox writes would let it change what
// the gates say and accept: with the user's cache dir inside one of
// Env.Untrusted, the kind caches nothing (the server starts at once),
// and elsewhere it caches the list there.
func TestKindCacheDirUntrusted(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("os.UserCacheDir follows XDG_CACHE_HOME on Linux only")
	}
	k := mcpKind(t)
	for _, inside := range []bool{true, false} {
		ws, other := t.TempDir(), t.TempDir()
		cache := filepath.Join(other, "cache")
		if inside {
			cache = filepath.Join(ws, "cache")
		}
		t.Setenv("XDG_CACHE_HOME", cache)
		if got, want := DefaultCacheDir([]string{ws}) == "", inside; got != want {
			t.Errorf("cache in the workspace %v: DefaultCacheDir = %q", inside, DefaultCacheDir([]string{ws}))
		}
		reg := gates.NewRegistry()
		s := testServer("add")
		s.Isolate.Host = true
		if _, err := k.Add(context.Background(), reg, s, gates.Env{Workspace: ws, Untrusted: []string{ws}}); err != nil {
			t.Fatal(err)
		}
		reg.Close()
		entries, _ := filepath.Glob(filepath.Join(cache, "gatebridge", "mcp", "*.json"))
		if inside && len(entries) != 0 {
			t.Errorf("a tool list cached where the sandbox writes: %v", entries)
		}
		if !inside && len(entries) != 1 {
			t.Errorf("no tool list cached in %s: %v", cache, entries)
		}
	}
}
