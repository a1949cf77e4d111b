package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

var (
	mcpServerOnce sync.Once
	mcpServerBin  string
	mcpServerErr  error
)

// testMCPServer builds integration/testdata/mcpserver (an SDK stdio
// server with the tools add and echo) once, outside any workspace.
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

// gates lists them (kind mcp); approval: ask is refused by run (no one to
// ask); a server program the sandbox could have written is refused.
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
	if out.Stdout != "rc=126\n" || !strings.Contains(out.Stderr, "needs approval") {
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
	// A typo under a server is an unknown key, not ignored.
	must(t, os.WriteFile(cfg, []byte("mcp:\n  servers:\n    calc:\n      comand: ["+srv+"]\n"), 0o644))
	out = gbRaw(t, ws, nil, nil, 0, "--config", cfg, "gates")
	if out.Code == 0 || !strings.Contains(out.Stderr, "mcp.servers.calc.comand") {
		t.Fatalf("a typo: %+v", out)
	}
}
