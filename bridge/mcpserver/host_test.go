package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/bridge/mcpserver/mcphttptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/bwrap"
	"github.com/gatebridge/gatebridge/sandbox/local"
)

// mcpSession serves a gatebridge MCP host over in-memory transports and
// returns a client session of the SDK's own client.
func mcpSession(t testing.TB, set Options, onProgress func(*mcp.ProgressNotificationParams)) (*mcp.ClientSession, string) {
	t.Helper()
	cs, _, ws := mcpSessionHost(t, set, onProgress)
	return cs, ws
}

// testSettings fills set's workspace (a fresh one) and backend (local).
func testSettings(t testing.TB, set Options) Options {
	t.Helper()
	if set.Workspace == "" {
		set.Workspace = t.TempDir()
		os.Chmod(set.Workspace, 0o777)
		os.Chmod(filepath.Dir(set.Workspace), 0o755)
	}
	if set.Backend == "" {
		set.Backend = local.Name
	}
	return set
}

// testBackends are local and bwrap, as a registry a test's server offers.
func testBackends() *sandbox.Registry {
	reg := sandbox.NewRegistry()
	if err := local.Register(reg); err != nil {
		panic(err)
	}
	if err := bwrap.Register(reg); err != nil {
		panic(err)
	}
	return reg
}

// testControl are the control plane's options of a test's servers:
// local and bwrap backends, the built-in gates.
func testControl() control.Options {
	return control.Options{
		Backends: testBackends(),
		Gates: func(workspace, inside string, writable bool) (*gates.Registry, map[string]string, error) {
			reg := gates.NewRegistry()
			o := gates.Options{Root: workspace, SandboxRoot: inside}
			if writable {
				o.WritableRoot, o.SandboxWritableRoot = workspace, inside
			}
			return reg, map[string]string{}, gates.RegisterBuiltins(reg, o)
		},
		Process: sandbox.Spec{KillGrace: 500 * time.Millisecond},
	}
}

// testServer is a server with set (testSettings fills it) on testControl.
func testServer(t testing.TB, set Options) *Server {
	t.Helper()
	set = testSettings(t, set)
	if set.Control.Backends == nil {
		set.Control = testControl()
	}
	return New(set)
}

// mcpSessionHost is mcpSession that also returns the host, to look at
// what it holds.
func mcpSessionHost(t testing.TB, set Options, onProgress func(*mcp.ProgressNotificationParams)) (*mcp.ClientSession, *host, string) {
	t.Helper()
	set = testSettings(t, set)
	copts := &mcp.ClientOptions{}
	if onProgress != nil {
		copts.ProgressNotificationHandler = func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { onProgress(r.Params) }
	}
	cs, h := connectHost(t, set, copts, nil)
	return cs, h, set.Workspace
}

// connectHost opens a host on set (testSettings already applied) and
// connects a client with copts and sopts to it in memory; all of it is
// closed at cleanup.
func connectHost(t testing.TB, set Options, copts *mcp.ClientOptions, sopts *mcp.ClientSessionOptions) (*mcp.ClientSession, *host) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h, err := testServer(t, set).newHost(ctx, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := h.server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, copts).Connect(ctx, ct, sopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Close()
		h.close()
		cancel()
	})
	return cs, h
}

// bash calls the bash tool and decodes its structured result.
func bash(t testing.TB, cs *mcp.ClientSession, args map[string]any) (*mcp.CallToolResult, bashOutput) {
	t.Helper()
	var out bashOutput
	return mcphttptest.Call(t, cs, "bash", args, &out), out
}

var text = mcphttptest.Text

// The tool as a model sees it: one bash tool whose description says how
// the shell behaves and lists every gate with its usage; input and output
// schemas.
func TestMCPToolDescription(t *testing.T) {
	cs, _ := mcpSession(t, Options{Timeout: time.Minute}, nil)
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
	for _, want := range []string{"read-only", "runs commands unconfined on the host: do not write it", "Network: the host's network", "shell state", "1m0s", "read_file [--offset N] [--limit N] PATH", "submit", "Exit 126"} {
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
	cs, ws := mcpSession(t, Options{Writable: true}, nil)
	os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("line one\nline two\n"), 0o644)

	res, out := bash(t, cs, map[string]any{"command": "read_file notes.txt | grep two; echo oops >&2; exit 3"})
	if !res.IsError || out.ExitCode != 3 || out.Stdout != "line two\n" || out.Stderr != "oops\n" {
		t.Fatalf("result %+v, structured %+v", res, out)
	}
	if got := text(res); got != "line two\n[stderr]\noops\n[gate call: read_file \"notes.txt\" → exit 0]\n[exit code 3]" {
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
	cs, _ := mcpSession(t, Options{MaxOutput: 1000}, nil)
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

// Output and an answer that are not UTF-8 keep their bytes in the
// structured result (docs/json.md): \xff and \xfe stay apart; the text
// for the model shows the answer quoted.
func TestMCPBytesNotUTF8(t *testing.T) {
	cs, _ := mcpSession(t, Options{}, nil)
	res, out := bash(t, cs, map[string]any{"command": `printf 'a\377'; printf 'b\376' >&2; submit "$(printf 'c\375')"`})
	if out.StdoutBase64 != "Yf8=" || out.StderrBase64 != "Yv4=" || out.AnswerBase64 != "Y/0=" {
		t.Fatalf("base64: stdout %q stderr %q answer %q", out.StdoutBase64, out.StderrBase64, out.AnswerBase64)
	}
	if !strings.Contains(text(res), `[answer: "c\xfd"]`) {
		t.Fatalf("text %q", text(res))
	}
	if _, out = bash(t, cs, map[string]any{"command": "echo é; submit é"}); out.StdoutBase64 != "" || out.AnswerBase64 != "" {
		t.Fatalf("valid UTF-8 got base64: %+v", out)
	}
}

// With a progress token, output arrives as progress notifications while
// the command runs; cancelling the call kills the command's whole group.
func TestMCPProgressAndCancel(t *testing.T) {
	var mu sync.Mutex
	var got []string
	started := make(chan struct{}, 1)
	cs, _ := mcpSession(t, Options{}, func(p *mcp.ProgressNotificationParams) {
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
	cs, _ := mcpSession(t, Options{}, nil)
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

// callTool calls a tool and decodes its structured result.
func callTool(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (*mcp.CallToolResult, bashOutput) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	var out bashOutput
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &out)
	}
	return res, out
}

// startBackground starts command with background: true and returns its id.
func startBackground(t *testing.T, cs *mcp.ClientSession, command string) string {
	t.Helper()
	res, out := callTool(t, cs, "bash", map[string]any{"command": command, "background": true})
	if res.IsError || out.ProcessID == "" {
		t.Fatalf("start %q: %q", command, text(res))
	}
	return out.ProcessID
}

// waitHost polls what h holds until ok says so (with h.mu held).
func waitHost(t *testing.T, h *host, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		h.mu.Lock()
		done := ok()
		h.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// exitedLocked reports whether background process id is kept and exited.
func (h *host) exitedLocked(id string) bool {
	c := h.procs[id]
	return c != nil && c.exit != nil
}

// keptLocked is how many background processes h keeps and the output
// bytes their captures hold, counted from the captures themselves.
func (h *host) keptLocked() (n int, held int64) {
	for _, c := range h.procs {
		if c.bg {
			n++
			held += c.held()
		}
	}
	return n, held
}

// The review's attack: background processes whose exit nobody reads were
// kept forever (996 MB RSS after 200). Now at most max_background are
// kept: the oldest exited one is evicted, and a client asking for it is
// told so, naming the key; when every one kept is running, a new one is
// refused, until one exits.
func TestMCPBackgroundCountBounded(t *testing.T) {
	cs, h, _ := mcpSessionHost(t, Options{MaxBackground: 3}, nil)
	for i := 1; i <= 10; i++ {
		id := startBackground(t, cs, fmt.Sprintf("echo %d", i))
		waitHost(t, h, id+" to exit", func() bool { return h.exitedLocked(id) })
		h.mu.Lock()
		n, _ := h.keptLocked()
		h.mu.Unlock()
		if n > 3 {
			t.Fatalf("after %d unread background processes, %d are kept (max_background 3)", i, n)
		}
	}
	res, _ := callTool(t, cs, "bash_output", map[string]any{"process_id": "bash-1"})
	if !res.IsError || !strings.Contains(text(res), "bash-1 was evicted") || !strings.Contains(text(res), "mcp.sessions.max_background)") {
		t.Fatalf("asking for an evicted process: %q", text(res))
	}
	for _, id := range []string{"bash-10", "bash-9"} {
		if res, out := callTool(t, cs, "bash_output", map[string]any{"process_id": id}); res.IsError || out.Running || out.Stdout != strings.TrimPrefix(id, "bash-")+"\n" {
			t.Fatalf("%s, kept: %q %+v", id, text(res), out)
		}
	}
	// Three running ones (bash-8, exited, is evicted for the third): a
	// fourth is refused, clearly, until one of them exits.
	var running []string
	for range 3 {
		running = append(running, startBackground(t, cs, "read x; echo got $x"))
	}
	res, _ = callTool(t, cs, "bash", map[string]any{"command": "true", "background": true})
	if !res.IsError || !strings.Contains(text(res), "cannot start another background process: 3 are running") || !strings.Contains(text(res), "mcp.sessions.max_background") {
		t.Fatalf("a 4th while 3 run: %q", text(res))
	}
	if res, _ := callTool(t, cs, "bash_output", map[string]any{"process_id": "bash-8"}); !strings.Contains(text(res), "bash-8 was evicted") {
		t.Fatalf("bash-8: %q", text(res))
	}
	callTool(t, cs, "write_stdin", map[string]any{"process_id": running[0], "chars": "it\n", "close_stdin": true})
	waitHost(t, h, running[0]+" to exit", func() bool { return h.exitedLocked(running[0]) })
	startBackground(t, cs, "true")
	if res, _ := callTool(t, cs, "bash_output", map[string]any{"process_id": running[0]}); !strings.Contains(text(res), running[0]+" was evicted") {
		t.Fatalf("%s: %q", running[0], text(res))
	}
	// The foreground form is not bounded by it.
	if res, out := bash(t, cs, map[string]any{"command": "echo fg"}); res.IsError || out.Stdout != "fg\n" {
		t.Fatalf("foreground: %q", text(res))
	}
}

// The bytes the background processes' output holds, in all, stay within
// max_background_bytes: exited ones are evicted, oldest first, to make
// room; while only running ones hold it, what does not fit is dropped and
// bash_output says how much.
func TestMCPBackgroundBytesBounded(t *testing.T) {
	const maxOut, budget = 64 << 10, 256 << 10
	cs, h, _ := mcpSessionHost(t, Options{MaxOutput: maxOut, MaxBackgroundBytes: budget}, nil)
	for i := 1; i <= 12; i++ {
		id := startBackground(t, cs, `head -c 100000 /dev/zero | tr '\0' x; head -c 100000 /dev/zero | tr '\0' y >&2`)
		waitHost(t, h, id+" to exit", func() bool { return h.exitedLocked(id) })
		h.mu.Lock()
		n, held := h.keptLocked()
		counted := h.bgBytes
		h.mu.Unlock()
		if held > budget || counted != held {
			t.Fatalf("after %d unread: %d kept hold %d bytes (counted %d), over max_background_bytes %d", i, n, held, counted, budget)
		}
	}
	res, _ := callTool(t, cs, "bash_output", map[string]any{"process_id": "bash-1"})
	if !res.IsError || !strings.Contains(text(res), "bash-1 was evicted") || !strings.Contains(text(res), "mcp.sessions.max_background_bytes") {
		t.Fatalf("asking for an evicted process: %q", text(res))
	}
	if res, out := callTool(t, cs, "bash_output", map[string]any{"process_id": "bash-12"}); res.IsError || !strings.HasPrefix(out.Stdout, "xxx") || !out.Truncated {
		t.Fatalf("the newest: %q", text(res)[:min(200, len(text(res)))])
	}
}

func TestMCPBackgroundBytesRunningOnly(t *testing.T) {
	cs, h, _ := mcpSessionHost(t, Options{MaxOutput: 1000, MaxBackgroundBytes: 1500}, nil)
	a := startBackground(t, cs, `head -c 1000 /dev/zero | tr '\0' a; read x`)
	waitHost(t, h, "a's output", func() bool { return h.bgBytes == 1000 })
	b := startBackground(t, cs, `head -c 1000 /dev/zero | tr '\0' b; read x`)
	waitHost(t, h, "b's output", func() bool {
		c := h.procs[b]
		return c.stdout.Total()+c.unkept[0] == 1000
	})
	h.mu.Lock()
	held := h.bgBytes
	h.mu.Unlock()
	if held != 1500 {
		t.Fatalf("two running processes hold %d bytes, want the budget 1500", held)
	}
	res, out := callTool(t, cs, "bash_output", map[string]any{"process_id": b})
	if !out.Running || !out.Truncated || !strings.HasPrefix(out.Stdout, strings.Repeat("b", 500)+"\n[gatebridge: 500 more bytes were dropped") || !strings.Contains(out.Stdout, "mcp.sessions.max_background_bytes") {
		t.Fatalf("b: %q %+v", text(res), out)
	}
	h.mu.Lock()
	held = h.bgBytes
	h.mu.Unlock()
	if held != 1000 {
		t.Fatalf("after b was read: %d bytes held, want a's 1000", held)
	}
	if _, out := callTool(t, cs, "bash_output", map[string]any{"process_id": a}); out.Stdout != strings.Repeat("a", 1000) {
		t.Fatalf("a: %d bytes", len(out.Stdout))
	}
}

// The review's measure: 200 background calls whose output nobody reads
// took 996 MB of RSS. Here 100 such calls of 400 KB each leave the heap
// within a few MB of where it started: what the host keeps is bounded by
// mcp.sessions.max_background_bytes, and the protocol layer under it keeps
// almost nothing of each (it kept 64 exited processes' output, 1.5 MiB
// each, which the MCP host never reads back).
func TestMCPBackgroundHeapBounded(t *testing.T) {
	cs, h, _ := mcpSessionHost(t, Options{MaxOutput: 256 << 10, MaxBackgroundBytes: 512 << 10}, nil)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for range 100 {
		id := startBackground(t, cs, `head -c 200000 /dev/zero | tr '\0' x; head -c 200000 /dev/zero | tr '\0' y >&2`)
		waitHost(t, h, id+" to exit", func() bool { return h.exitedLocked(id) })
	}
	grown := int64(heap()) - int64(before)
	t.Logf("heap grew by %.1f MB", float64(grown)/(1<<20))
	if grown > 16<<20 {
		t.Fatalf("100 unread background calls of 400 KB grew the heap by %.1f MB", float64(grown)/(1<<20))
	}
}
