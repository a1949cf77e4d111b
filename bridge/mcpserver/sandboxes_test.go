package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testPool is `mcp --http`'s pool of session sandboxes behind one MCP
// server, with sessions over in-memory transports.
type testPool struct {
	t      *testing.T
	pool   *sandboxes
	server *mcp.Server
	log    *lockedBuffer
	ctx    context.Context
}

// newTestPool makes the pool with open (nil: a real host on the local
// backend), max and idle.
func newTestPool(t *testing.T, open func(context.Context) (*host, error), max int, idle time.Duration) *testPool {
	t.Helper()
	if open == nil {
		open = testOpen(t)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &testPool{t: t, log: &lockedBuffer{}, ctx: ctx}
	p.pool = newSandboxes(ctx, open, max, idle, func(format string, args ...any) { fmt.Fprintf(p.log, format+"\n", args...) })
	p.server = New(Options{}).newMCPServer("bash", nil, p.pool.resolve)
	t.Cleanup(func() {
		p.pool.close()
		cancel()
	})
	return p
}

// testOpen opens real hosts on the local backend, all in one workspace.
func testOpen(t *testing.T) func(context.Context) (*host, error) {
	srv := testServer(t, Options{})
	return func(ctx context.Context) (*host, error) { return srv.newHost(ctx, nil) }
}

// connect opens an MCP session; it returns the client's side and the
// server's.
func (p *testPool) connect() (*mcp.ClientSession, *mcp.ServerSession) {
	p.t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := p.server.Connect(p.ctx, st, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(p.ctx, ct, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { cs.Close() })
	return cs, ss
}

// live is how many sandbox slots the pool holds.
func (p *testPool) live() int {
	p.pool.mu.Lock()
	defer p.pool.mu.Unlock()
	return p.pool.live
}

// poll waits up to 30 s for ok.
func poll(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The review's attack: 24 clients of `mcp --http` held 24 docker
// containers. Now a session past mcp.sessions.max_sandboxes gets a tool
// error naming the key (and the operator a log line), and gets a sandbox
// once another session ends.
func TestMCPSandboxesCapped(t *testing.T) {
	p := newTestPool(t, nil, 2, time.Hour)
	a, _ := p.connect()
	b, _ := p.connect()
	c, _ := p.connect()
	for _, cs := range []*mcp.ClientSession{a, b} {
		if res, out := bash(t, cs, map[string]any{"command": "echo ok"}); res.IsError || out.Stdout != "ok\n" {
			t.Fatalf("within the cap: %q", text(res))
		}
	}
	res, _ := bash(t, c, map[string]any{"command": "echo ok"})
	if !res.IsError || !strings.Contains(text(res), "no sandbox for this session: 2 are open") || !strings.Contains(text(res), "(mcp.sessions.max_sandboxes)") {
		t.Fatalf("a third session's call: %q", text(res))
	}
	if n := p.live(); n != 2 {
		t.Fatalf("%d sandboxes for a cap of 2", n)
	}
	if !strings.Contains(p.log.String(), "mcp.sessions.max_sandboxes") {
		t.Fatalf("no log line for the refusal: %q", p.log.String())
	}
	a.Close()
	poll(t, "a slot for the third session once the first ended", func() bool {
		res, out := bash(t, c, map[string]any{"command": "echo ok"})
		return !res.IsError && out.Stdout == "ok\n"
	})
	if n := p.live(); n != 2 {
		t.Fatalf("%d sandboxes for a cap of 2", n)
	}
}

// A sandbox with no call for mcp.sessions.idle_timeout is closed (its
// background processes stopped) and its slot goes to another session; a
// call in progress keeps it. Its session's next call opens a new one,
// which says what became of the old processes and goes on with the ids.
func TestMCPSandboxesIdle(t *testing.T) {
	const idle = 500 * time.Millisecond
	p := newTestPool(t, nil, 1, idle)
	a, ssA := p.connect()
	b, _ := p.connect()
	m := fmt.Sprint(500_000_000 + time.Now().UnixNano()%400_000_000)
	id := startBackground(t, a, "sleep "+m)
	if id != "bash-1" {
		t.Fatalf("background process %s", id)
	}
	poll(t, "the background process to run", func() bool { return len(pgrep(m)) > 0 })
	slot := func() *sessionSlot {
		p.pool.mu.Lock()
		defer p.pool.mu.Unlock()
		return p.pool.sessions[ssA].slot
	}
	first := slot()
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, _ := a.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "sleep 1.5; echo alive"}})
		done <- res
	}()
	poll(t, "a's call to run", func() bool {
		p.pool.mu.Lock()
		defer p.pool.mu.Unlock()
		return first.calls == 1 || first.removed
	})
	if slot() != first {
		t.Fatal("a's sandbox was closed before its next call started (a loaded machine? the idle time is 500ms)")
	}
	time.Sleep(2 * idle)
	if res, _ := bash(t, b, map[string]any{"command": "true"}); !res.IsError || !strings.Contains(text(res), "mcp.sessions.idle_timeout") {
		t.Fatalf("b took a's slot while a's call ran: %q", text(res))
	}
	if res := <-done; res == nil || res.IsError || !strings.Contains(text(res), "alive") {
		t.Fatalf("a's call in progress: %v", res)
	}
	start := time.Now()
	poll(t, "b to get the slot once a is idle", func() bool {
		res, _ := bash(t, b, map[string]any{"command": "true"})
		return !res.IsError
	})
	if waited := time.Since(start); waited < idle/2 {
		t.Fatalf("the slot was free after %v, before a was idle for %v", waited, idle)
	}
	poll(t, "a's background process to be stopped", func() bool { return len(pgrep(m)) == 0 })
	b.Close()
	poll(t, "b's sandbox to close", func() bool { return p.live() == 0 })
	res, _ := callTool(t, a, "bash_output", map[string]any{"process_id": "bash-1"})
	if !res.IsError || !strings.Contains(text(res), "bash-1 is gone") || !strings.Contains(text(res), "(mcp.sessions.idle_timeout)") {
		t.Fatalf("a's old process: %q", text(res))
	}
	if id := startBackground(t, a, "true"); id != "bash-3" {
		t.Fatalf("a's next process is %s, want bash-3 (ids go on)", id)
	}
}

// A session's sandbox is opened outside the pool's lock: while one
// session's open is stuck (a slow docker start), another session's call
// completes; and calls of one session share one open.
func TestMCPSandboxesOpenConcurrently(t *testing.T) {
	var opens atomic.Int32
	entered, unblock := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(unblock) }) }
	defer release() // before the sessions close at cleanup, which waits for their calls
	real := testOpen(t)
	p := newTestPool(t, func(ctx context.Context) (*host, error) {
		if opens.Add(1) == 1 {
			close(entered)
			select {
			case <-unblock:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return real(ctx)
	}, 4, time.Hour)
	a, ssA := p.connect()
	b, _ := p.connect()
	results := make(chan string, 2)
	callA := func(word string) {
		res, err := a.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo " + word}})
		if err != nil {
			results <- err.Error()
			return
		}
		results <- text(res)
	}
	go callA("a1")
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("a's open did not start")
	}
	go callA("a2")
	poll(t, "a's second call to wait for the same open", func() bool {
		p.pool.mu.Lock()
		defer p.pool.mu.Unlock()
		st := p.pool.sessions[ssA]
		return st != nil && st.slot != nil && st.slot.calls == 2
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := b.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo b"}})
	if err != nil || res.IsError || !strings.Contains(text(res), "b\n") {
		t.Fatalf("b's call while a's sandbox was being opened: %v %v", err, res)
	}
	if n := opens.Load(); n != 2 {
		t.Fatalf("%d opens for 2 sessions", n)
	}
	release()
	got := []string{<-results, <-results}
	if !strings.Contains(strings.Join(got, " "), "a1\n") || !strings.Contains(strings.Join(got, " "), "a2\n") {
		t.Fatalf("a's calls: %q", got)
	}
	if n := opens.Load(); n != 2 {
		t.Fatalf("%d opens for 2 sessions: a's two calls opened twice", n)
	}
}

// Stopping the server while a sandbox is being opened stops the open and
// leaves nothing: close returns, no slot is held, later calls are refused.
func TestMCPSandboxesCloseDuringOpen(t *testing.T) {
	entered := make(chan struct{})
	p := newTestPool(t, func(ctx context.Context) (*host, error) {
		close(entered)
		<-ctx.Done()
		return nil, ctx.Err()
	}, 4, time.Hour)
	a, _ := p.connect()
	errc := make(chan error, 1)
	go func() {
		_, err := a.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "true"}})
		errc <- err
	}()
	<-entered
	closed := make(chan struct{})
	go func() { p.pool.close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("close waited for an open that never ends")
	}
	if n := p.live(); n != 0 {
		t.Fatalf("%d slots held after close", n)
	}
	if _, _, err := p.pool.resolve(context.Background(), nil); err != errStopping {
		t.Fatalf("a call after close: %v", err)
	}
}
