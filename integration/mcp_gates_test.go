package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var (
	mcpServerOnce sync.Once
	mcpServerBin  string
	mcpServerErr  error
)

// testMCPServer builds integration/testdata/mcpserver (an SDK stdio
// server with the tools add, echo and probe) once, outside any workspace.
func testMCPServer(t *testing.T) string {
	t.Helper()
	mcpServerOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		dir, err := os.MkdirTemp("", "gb-mcpserver-")
		if err != nil {
			mcpServerErr = err
			return
		}
		os.Chmod(dir, 0o755)
		mcpServerBin = filepath.Join(dir, "mcpserver")
		build := exec.Command("go", "build", "-o", mcpServerBin, "./integration/testdata/mcpserver")
		build.Dir = filepath.Dir(filepath.Dir(file))
		if out, err := build.CombinedOutput(); err != nil {
			mcpServerErr = err
			mcpServerBin = string(out)
		}
	})
	if mcpServerErr != nil {
		t.Fatalf("build the test MCP server: %v: %s", mcpServerErr, mcpServerBin)
	}
	return mcpServerBin
}

// An MCP server's tools are commands in the sandbox, on every backend:
// key=value words converted by the tool's schema, --help, exit 2 for a bad
// argument before the server is called.
func TestMCPToolsAsGates(t *testing.T) {
	srv := testMCPServer(t)
	cfg := "mcp:\n  servers:\n    calc:\n      command: [" + srv + "]\n"
	forEachBackend(t, func(t *testing.T, backend string) {
		out := gb(t, backend, Run{Config: cfg, Command: []string{"sh", "-c",
			`calc_add a=2 b=40; calc_echo id=00123 'tags=["x"]'; calc_add a=two b=1; echo "rc=$?"; calc_add --help | head -1`}})
		want := "{\"sum\":42}\n{\"id\":\"00123\",\"tags\":[\"x\"]}\nrc=2\nusage: calc_add a=… b=…\n"
		if out.Code != 0 || out.Stdout != want || !strings.Contains(out.Stderr, "parameter a") {
			t.Fatalf("exit %d\nstdout %q\nwant   %q\nstderr %s", out.Code, out.Stdout, want, out.Stderr)
		}
	})
}

// gates lists them (kind mcp); approval: ask is refused by run when it
// has no terminal to ask on; a server program the sandbox could have written is refused.
func TestMCPToolsConfig(t *testing.T) {
	srv := testMCPServer(t)
	ws := workspace(t)
	cfg := filepath.Join(workspace(t), "gatebridge.yaml")
	must(t, os.WriteFile(cfg, []byte("mcp:\n  servers:\n    calc:\n      command: ["+srv+"]\n      tools: [add]\n      prefix: \"\"\n      approval: ask\n"), 0o644))
	out := gbRaw(t, ws, nil, nil, 0, "--config", cfg, "gates", "--format", "json", "--workspace", ws)
	if out.Code != 0 || !strings.Contains(out.Stdout, `"name": "add"`) || !strings.Contains(out.Stdout, `"kind": "mcp"`) || strings.Contains(out.Stdout, `"echo"`) {
		t.Fatalf("gates: %+v", out)
	}
	out = gbRaw(t, ws, nil, nil, 0, "--config", cfg, "run", "--sandbox", "local", "--", "sh", "-c", "add a=1 b=2; echo rc=$?")
	if out.Stdout != "rc=126\n" || !strings.Contains(out.Stderr, "needs approval") || !strings.Contains(out.Stderr, "gatebridge grants add") {
		t.Fatalf("approval ask under run: %+v", out)
	}
	// The server's program inside the workspace: refused.
	planted := filepath.Join(ws, "server")
	data, err := os.ReadFile(srv)
	must(t, err)
	must(t, os.WriteFile(planted, data, 0o755))
	must(t, os.WriteFile(cfg, []byte("mcp:\n  servers:\n    calc:\n      command: ["+planted+"]\n"), 0o644))
	out = gbRaw(t, ws, nil, nil, 0, "--config", cfg, "run", "--sandbox", "local", "--workspace", ws, "--", "true")
	if out.Code != 125 || !strings.Contains(out.Stderr, "which the sandbox can write") {
		t.Fatalf("a server program in the workspace: %+v", out)
	}
	// A server program in a directory others can write (they could
	// replace it): refused, as for a command gate.
	open := filepath.Join(t.TempDir(), "open")
	must(t, os.Mkdir(open, 0o777))
	must(t, os.Chmod(open, 0o777))
	replaceable := filepath.Join(open, "server")
	must(t, os.WriteFile(replaceable, data, 0o755))
	must(t, os.WriteFile(cfg, []byte("mcp:\n  servers:\n    calc:\n      command: ["+replaceable+"]\n"), 0o644))
	out = gbRaw(t, ws, nil, nil, 0, "--config", cfg, "run", "--sandbox", "local", "--workspace", ws, "--", "true")
	if out.Code != 125 || !strings.Contains(out.Stderr, "writable by group or others") {
		t.Fatalf("a server program others can replace: %+v", out)
	}
	// A typo under a server is an unknown key, not ignored.
	must(t, os.WriteFile(cfg, []byte("mcp:\n  servers:\n    calc:\n      comand: ["+srv+"]\n"), 0o644))
	out = gbRaw(t, ws, nil, nil, 0, "--config", cfg, "gates")
	if out.Code == 0 || !strings.Contains(out.Stderr, "mcp.servers.calc.comand") {
		t.Fatalf("a typo: %+v", out)
	}
}

// TestMCPCodeModeSize measures "code mode" (issue 14 §4) with three MCP
// servers configured: the tools/list a host sees from gatebridge mcp (one
// bash tool describing every gate) against the sum of the servers' own
// tools/list, in bytes/4 tokens, and a task chaining three tools: one bash
// call against three tool calls. It logs the figures (README) and checks
// the chain's result.
func TestMCPCodeModeSize(t *testing.T) {
	srv := testMCPServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Each server's own tools/list, as a host would get it.
	direct := 0
	for range 3 {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(ctx, &mcp.CommandTransport{Command: exec.Command(srv)}, nil)
		must(t, err)
		res, err := cs.ListTools(ctx, nil)
		must(t, err)
		b, _ := json.Marshal(res)
		direct += len(b)
		cs.Close()
	}
	cfg := filepath.Join(workspace(t), "gatebridge.yaml")
	must(t, os.WriteFile(cfg, []byte("gates:\n  builtins: false\nmcp:\n  servers:\n    a:\n      command: ["+srv+"]\n    b:\n      command: ["+srv+"]\n    c:\n      command: ["+srv+"]\n"), 0o644))
	cmd := exec.Command(binary, "--config", cfg, "mcp", "--sandbox", "local", "--workspace", workspace(t))
	cmd.Dir = workspace(t)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	must(t, err)
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	must(t, err)
	b, _ := json.Marshal(res)
	via := len(b)
	// The chain: add, add again with the result, then echo it, in one call.
	call, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": `s=$(a_add a=2 b=3 | jq -r .sum 2>/dev/null || a_add a=2 b=3 | sed 's/[^0-9]//g'); t=$(b_add a=$s b=10 | sed 's/[^0-9]//g'); c_echo id=$t`}})
	must(t, err)
	if txt := call.Content[0].(*mcp.TextContent).Text; !strings.Contains(txt, `{"id":"15"}`) {
		t.Fatalf("the chain: %q", txt)
	}
	t.Logf("code mode, 3 servers × 3 tools: tools/list the host sees: gatebridge mcp %d bytes (~%d tokens), the servers' own %d bytes (~%d tokens); a 3-tool chain: 1 model round trip through bash, 3 calling the tools one by one",
		via, via/4, direct, direct/4)
}

// TestMCPServerStartsLazily: the first run starts the server to learn its
// tools (and caches them); a later run whose command calls no tool of it
// does not start it at all, and one that does starts it at that call.
func TestMCPServerStartsLazily(t *testing.T) {
	needBackend(t, "bwrap")
	srv := testMCPServer(t)
	// The server runs in its own sandbox: it may write only where
	// isolate.write says, in a directory its uid can write.
	dir := workspace(t)
	must(t, os.Chmod(dir, 0o777))
	starts := filepath.Join(dir, "starts")
	cfg := "mcp:\n  servers:\n    calc:\n      command: [" + srv + "]\n      env: [GATEBRIDGE_TEST_MCP_STARTS=" + starts + "]\n" +
		"      isolate: {write: [" + dir + "]}\n"
	count := func() int {
		b, _ := os.ReadFile(starts)
		return strings.Count(string(b), "started")
	}
	out := gb(t, "bwrap", Run{Config: cfg, Command: []string{"sh", "-c", "command -v calc_add >/dev/null && echo listed"}})
	if out.Code != 0 || out.Stdout != "listed\n" || count() != 1 {
		t.Fatalf("first run: %+v, %d starts", out, count())
	}
	out = gb(t, "bwrap", Run{Config: cfg, Command: []string{"sh", "-c", "command -v calc_add >/dev/null && calc_add --help | head -1"}})
	if out.Code != 0 || !strings.HasPrefix(out.Stdout, "usage: calc_add") || count() != 1 {
		t.Fatalf("second run, no call: %+v, %d starts (want still 1)", out, count())
	}
	out = gb(t, "bwrap", Run{Config: cfg, Command: []string{"calc_add", "a=1", "b=2"}})
	if out.Code != 0 || out.Stdout != "{\"sum\":3}\n" || count() != 2 {
		t.Fatalf("third run, a call: %+v, %d starts (want 2)", out, count())
	}
}
