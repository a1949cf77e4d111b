package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatebridge/gatebridge/bridge/mcpserver"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/gates/mcptools/mcptest"
	"github.com/gatebridge/gatebridge/sandbox/local"
)

// hostileConfig writes a config with the hostile MCP server of mcptest
// (served in process) as mcp.servers.evil, plus extra lines under it, and
// makes the cwd a fresh workspace.
func hostileConfig(t *testing.T, extra string) string {
	t.Helper()
	t.Chdir(t.TempDir())
	cfg := filepath.Join(t.TempDir(), "gatebridge.yaml")
	url := mcptest.Serve(t, mcptest.Hostile())
	if err := os.WriteFile(cfg, []byte("mcp:\n  servers:\n    evil:\n      url: "+url+"\n"+extra), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestHostileMCPServerText performs issue 26's attack through every
// listing of the CLI: a hostile MCP server's names, descriptions, property
// names and enum values carry lines, bidi overrides and invisible
// characters. `gates` (text, json, openai), `prompt`, the MCP bash tool's
// description and the warnings about refused tools show no forged line
// and no hidden character; the kept tools are listed.
func TestHostileMCPServerText(t *testing.T) {
	cfg := hostileConfig(t, "")
	outputs := map[string]string{}
	for _, args := range [][]string{
		{"gates"}, {"gates", "--format", "json"}, {"gates", "--format", "openai"}, {"prompt", "--sandbox", "local"},
	} {
		var out, errb bytes.Buffer
		if code := run(append([]string{"--config", cfg}, args...), nil, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		what := strings.Join(args, " ")
		outputs[what] = out.String()
		outputs[what+" (stderr)"] = errb.String()
		if !strings.Contains(out.String(), "evil_lookup") || !strings.Contains(out.String(), "evil_titled") {
			t.Errorf("%s lacks the kept tools:\n%s", what, out.String())
		}
		if n := strings.Count(errb.String(), "is not a gate"); n != len(mcptest.Refused) {
			t.Errorf("%s: %d refusals, want %d:\n%s", what, n, len(mcptest.Refused), errb.String())
		}
	}
	// What the JSON formats carry, decoded: the JSON escapes would hide a
	// line from the checks below. Descriptions inside an input schema keep
	// their own (indented, multi-line) text: the payload may be a line of
	// one, never a name, a value, a summary or a usage line.
	for _, f := range []string{"gates --format json", "gates --format openai"} {
		var v any
		if err := json.Unmarshal([]byte(outputs[f]), &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var all []string
		walkJSON(v, "", func(key, s string) {
			if key == "description" && strings.Contains(s, "\n") {
				s = strings.ReplaceAll(s, "\n"+mcptest.Payload, "\n")
			}
			all = append(all, s)
		})
		outputs[f+" (decoded)"] = strings.Join(all, "\n")
	}

	// gatebridge mcp's bash tool: its description, from a server made as
	// `gatebridge mcp` makes it, as an MCP client lists it.
	c, _, err := loadConfig(cfg, nil, newBackends())
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	opts, closeAudit, err := (&app{backends: newBackends(), kinds: newKinds(), cfg: c}).rpcOptions(&logs)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAudit()
	ws, _ := os.Getwd()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, ct := mcp.NewInMemoryTransports()
	served := make(chan error, 1)
	go func() {
		served <- mcpserver.New(mcpserver.Options{Control: opts.Options, Backend: local.Name, Workspace: ws}).Serve(ctx, st)
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) == 0 || tools.Tools[0].Name != "bash" {
		t.Fatalf("tools: %v %v", tools, err)
	}
	description := tools.Tools[0].Description
	outputs["mcp bash description"] = description
	cs.Close()
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	outputs["mcp log"] = logs.String()
	if !strings.Contains(description, "- evil_lookup id=… [mode=…]: Look up a record.\n") {
		t.Errorf("the bash tool's description lacks evil_lookup:\n%s", description)
	}

	for what, text := range outputs {
		if bad := mcptest.Injected(text); bad != "" {
			t.Errorf("%s: %s in:\n%s", what, bad, text)
		}
	}
}

// walkJSON calls f with every string in v (object keys too), and the key
// it is the value of.
func walkJSON(v any, key string, f func(key, s string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			f("", k)
			walkJSON(x, k, f)
		}
	case []any:
		for _, x := range v {
			walkJSON(x, "", f)
		}
	case string:
		f(key, v)
	}
}

// A tool the allowlist names that the server lacks is a config error
// naming mcp.servers.NAME.tools; the allowlist's last name matching lets
// no later tool through (issue 26 item 9). A server listing more tools
// than max_tools is an error naming that key, unless an allowlist picks
// from them.
func TestMCPToolSettings(t *testing.T) {
	for _, tc := range []struct{ extra, key string }{
		{"      tools: [lookup, nosuch]\n", "mcp.servers.evil.tools: mcp server evil: the server has no such tool: \"nosuch\""},
		{"      max_tools: 3\n", "mcp.servers.evil.max_tools: mcp server evil: the server lists more than 3 tools"},
	} {
		var out, errb bytes.Buffer
		if code := run([]string{"--config", hostileConfig(t, tc.extra), "gates"}, nil, &out, &errb); code == 0 || !strings.Contains(errb.String(), tc.key) {
			t.Errorf("%q: exit %d: %s", tc.extra, code, errb.String())
		}
	}
	cfg := hostileConfig(t, "      tools: [lookup]\n      max_tools: 1\n")
	var out, errb bytes.Buffer
	if code := run([]string{"--config", cfg, "gates", "--format", "json"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var docs []gates.Doc
	if err := json.Unmarshal(out.Bytes(), &docs); err != nil {
		t.Fatal(err)
	}
	var mcpGates []string
	for _, d := range docs {
		if d.Kind == "mcp" {
			mcpGates = append(mcpGates, d.Name)
		}
	}
	if strings.Join(mcpGates, " ") != "evil_lookup" || errb.Len() != 0 {
		t.Fatalf("tools: [lookup]: gates %v, stderr %q", mcpGates, errb.String())
	}
}
