package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/sandbox"
)

// mcpSession serves a gatebridge MCP host over in-memory transports and
// returns a client session of the SDK's own client.
func mcpSession(t *testing.T, set mcpSettings, onProgress func(*mcp.ProgressNotificationParams)) (*mcp.ClientSession, string) {
	t.Helper()
	cs, _, ws := mcpSessionHost(t, set, onProgress)
	return cs, ws
}

// testSettings fills set's workspace (a fresh one) and backend (local).
func testSettings(t *testing.T, set mcpSettings) mcpSettings {
	t.Helper()
	if set.Workspace == "" {
		set.Workspace = t.TempDir()
		os.Chmod(set.Workspace, 0o777)
		os.Chmod(filepath.Dir(set.Workspace), 0o755)
	}
	if set.Backend == "" {
		set.Backend = sandbox.LocalName
	}
	return set
}

// testRPCServer is the protocol server the MCP hosts of a test use: local
// backend, the built-in gates.
func testRPCServer() *rpc.Server {
	return rpc.NewServer(rpc.Options{
		Backends: sandbox.NewRegistry(),
		Gates: func(workspace, inside string, writable bool) (*gates.Registry, map[string]string, error) {
			reg := gates.NewRegistry()
			o := gates.Options{Root: workspace, SandboxRoot: inside}
			if writable {
				o.WritableRoot, o.SandboxWritableRoot = workspace, inside
			}
			return reg, map[string]string{}, gates.RegisterBuiltins(reg, o)
		},
		Process: sandbox.Spec{KillGrace: 500 * time.Millisecond},
	})
}

// mcpSessionHost is mcpSession that also returns the host, to look at
// what it holds.
func mcpSessionHost(t *testing.T, set mcpSettings, onProgress func(*mcp.ProgressNotificationParams)) (*mcp.ClientSession, *mcpHost, string) {
	t.Helper()
	set = testSettings(t, set)
	ctx, cancel := context.WithCancel(context.Background())
	h, err := newMCPHost(ctx, testRPCServer(), set, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := h.server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	copts := &mcp.ClientOptions{}
	if onProgress != nil {
		copts.ProgressNotificationHandler = func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { onProgress(r.Params) }
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, copts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Close()
		h.close()
		cancel()
	})
	return cs, h, set.Workspace
}

// bash calls the bash tool and decodes its structured result.
func bash(t *testing.T, cs *mcp.ClientSession, args map[string]any) (*mcp.CallToolResult, bashOutput) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: args})
	if err != nil {
		t.Fatalf("bash %v: %v", args, err)
	}
	var out bashOutput
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &out)
	}
	return res, out
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// The tool as a model sees it: one bash tool whose description says how
// the shell behaves and lists every gate with its usage; input and output
// schemas.
func TestMCPToolDescription(t *testing.T) {
	cs, _ := mcpSession(t, mcpSettings{Timeout: time.Minute}, nil)
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var tool *mcp.Tool
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Name == "bash" {
			tool = tl
		}
	}
	if strings.Join(names, " ") != "bash bash_output write_stdin" {
		t.Fatalf("tools: %v", names)
	}
	for _, want := range []string{"read-only", "persist between calls", "shell state", "1m0s", "read_file [--offset N] [--limit N] PATH", "submit", "Exit 126"} {
		if !strings.Contains(tool.Description, want) {
			t.Errorf("description lacks %q:\n%s", want, tool.Description)
		}
	}
	in, _ := json.Marshal(tool.InputSchema)
	out, _ := json.Marshal(tool.OutputSchema)
	if !strings.Contains(string(in), `"required":["command"]`) || !strings.Contains(string(out), `"exit_code"`) {
		t.Errorf("schemas: in %s out %s", in, out)
	}
}

func TestMCPBash(t *testing.T) {
	cs, ws := mcpSession(t, mcpSettings{Writable: true}, nil)
	os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("line one\nline two\n"), 0o644)

	res, out := bash(t, cs, map[string]any{"command": "read_file notes.txt | grep two; echo oops >&2; exit 3"})
	if !res.IsError || out.ExitCode != 3 || out.Stdout != "line two\n" || out.Stderr != "oops\n" {
		t.Fatalf("result %+v, structured %+v", res, out)
	}
	if got := text(res); got != "line two\n[stderr]\noops\n[exit code 3]" {
		t.Fatalf("text %q", got)
	}
	// Files persist between calls; shell state does not.
	bash(t, cs, map[string]any{"command": "echo kept > f; cd /; X=1"})
	res, out = bash(t, cs, map[string]any{"command": `cat f; pwd; echo "X=$X"; submit done`})
	if res.IsError || out.Stdout != "kept\n"+ws+"\nX=\n" || out.Answer == nil || *out.Answer != "done" {
		t.Fatalf("second call: %+v %q", out, text(res))
	}
	// Bad input: a tool error the model can read, not a protocol error.
	res, _ = bash(t, cs, map[string]any{"command": "  "})
	if !res.IsError || !strings.Contains(text(res), "command is empty") {
		t.Fatalf("empty command: %+v %q", res, text(res))
	}
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"cmd": "ls"}}); err == nil {
		if res, _ := bash(t, cs, map[string]any{"cmd": "ls"}); !res.IsError {
			t.Fatal("a call without command was accepted")
		}
	}
}

func TestMCPTimeoutAndTruncation(t *testing.T) {
	cs, _ := mcpSession(t, mcpSettings{MaxOutput: 1000}, nil)
	m := fmt.Sprint(500_000_000 + time.Now().UnixNano()%400_000_000)
	res, out := bash(t, cs, map[string]any{"command": "sleep " + m, "timeout_ms": 300})
	if !res.IsError || !out.TimedOut || out.ExitCode != 124 || !strings.Contains(text(res), "timed out") {
		t.Fatalf("timeout: %+v %q", out, text(res))
	}
	res, out = bash(t, cs, map[string]any{"command": `head -c 5000 /dev/zero | tr '\0' x`})
	if !out.Truncated || !strings.Contains(text(res), "bytes dropped") || len(out.Stdout) > 1200 {
		t.Fatalf("truncation: truncated %v, %d bytes, text %q", out.Truncated, len(out.Stdout), text(res))
	}
}

// With a progress token, output arrives as progress notifications while
// the command runs; cancelling the call kills the command's whole group.
func TestMCPProgressAndCancel(t *testing.T) {
	var mu sync.Mutex
	var got []string
	started := make(chan struct{}, 1)
	cs, _ := mcpSession(t, mcpSettings{}, func(p *mcp.ProgressNotificationParams) {
		mu.Lock()
		got = append(got, p.Message)
		mu.Unlock()
		if strings.Contains(p.Message, "started") {
			select {
			case started <- struct{}{}:
			default:
			}
		}
	})
	m := fmt.Sprint(500_000_000 + time.Now().UnixNano()%400_000_000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	params := &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "sleep " + m + " & echo started; wait"}}
	params.SetProgressToken("tok-1")
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, params)
		errc <- err
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("no progress notification with the command's output")
	}
	if n := len(pgrep(m)); n == 0 {
		t.Fatal("the command is not running")
	}
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the cancelled call returned no error")
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(pgrep(m)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := pgrep(m); len(left) > 0 {
		t.Fatalf("still running after the call was cancelled: %v", left)
	}
	// The session goes on.
	if _, out := bash(t, cs, map[string]any{"command": "echo after"}); out.Stdout != "after\n" {
		t.Fatalf("after cancel: %+v", out)
	}
}

func pgrep(marker string) []string {
	out, _ := exec.Command("pgrep", "-f", "sleep "+marker).Output()
	return strings.Fields(string(out))
}

// The background form: bash with background: true returns a process id;
// write_stdin feeds it; bash_output returns the output since the last read
// and, once it has exited, the exit (then the id is gone).
func TestMCPBackground(t *testing.T) {
	cs, _ := mcpSession(t, mcpSettings{}, nil)
	call := func(tool string, args map[string]any) (*mcp.CallToolResult, bashOutput) {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s %v: %v", tool, args, err)
		}
		var out bashOutput
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &out)
		return res, out
	}
	res, out := call("bash", map[string]any{"command": "echo ready; read l; echo got:$l; read m; echo and:$m; exit 5", "background": true})
	if out.ProcessID == "" || !out.Running || !strings.Contains(text(res), "background") {
		t.Fatalf("start: %+v %q", out, text(res))
	}
	id := out.ProcessID
	_, out = call("bash_output", map[string]any{"process_id": id, "wait_ms": 20000})
	if out.Stdout != "ready\n" || !out.Running {
		t.Fatalf("first read: %+v", out)
	}
	call("write_stdin", map[string]any{"process_id": id, "chars": "one\n"})
	_, out = call("bash_output", map[string]any{"process_id": id, "wait_ms": 20000})
	if out.Stdout != "got:one\n" || !out.Running {
		t.Fatalf("second read: %+v", out)
	}
	call("write_stdin", map[string]any{"process_id": id, "chars": "two\n", "close_stdin": true})
	var got string
	for i := 0; i < 50 && !strings.Contains(got, "exit code 5"); i++ {
		res, out = call("bash_output", map[string]any{"process_id": id, "wait_ms": 20000})
		got += text(res)
	}
	if !strings.Contains(got, "and:two") || !strings.Contains(got, "[exit code 5]") || out.Running || out.ExitCode != 5 {
		t.Fatalf("to the end: %q %+v", got, out)
	}
	if res, _ := call("bash_output", map[string]any{"process_id": id}); !res.IsError || !strings.Contains(text(res), "no background process") {
		t.Fatalf("after the exit was read: %q", text(res))
	}
}
