package rpc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/sandbox"
)

// client is a test client on one in-process connection.
type client struct {
	t      testing.TB
	w      *io.PipeWriter
	mu     sync.Mutex
	nextID int
	waits  map[string]chan *Message
	notes  chan *Message // notifications and server requests, in order
	done   chan error    // Serve's result
	closed bool
	seqs   map[string]int64 // last process/output seq by process; -1 after process/exited
	// backlog holds messages next passed over (used by the test goroutine
	// only).
	backlog []*Message
}

// checkOrder fails the test when a process's output skips or repeats a
// seq, or comes after its process/exited.
func (c *client) checkOrder(m *Message) {
	var p struct {
		ProcessID string `json:"processId"`
		Seq       int64  `json:"seq"`
	}
	json.Unmarshal(m.Params, &p)
	switch m.Method {
	case MethodProcessOutput:
		if last := c.seqs[p.ProcessID]; last < 0 || p.Seq != last+1 {
			c.t.Errorf("process %s: output seq %d after %d (-1: after process/exited)", p.ProcessID, p.Seq, last)
		}
		c.seqs[p.ProcessID] = p.Seq
	case MethodProcessExited:
		c.seqs[p.ProcessID] = -1
	}
}

// testOptions are the server options of the tests: local and bwrap, the
// built-in gates, short gate timeouts.
func testOptions(t testing.TB) Options {
	return Options{
		Backends:         sandbox.NewRegistry(),
		AllowUnsandboxed: true,
		Gates: func(workspace, inside string, writable bool) (*gates.Registry, map[string]string, error) {
			reg := gates.NewRegistry()
			o := gates.Options{Root: workspace, SandboxRoot: inside}
			if err := gates.RegisterBuiltins(reg, o); err != nil {
				return nil, nil, err
			}
			kinds := map[string]string{}
			for _, s := range reg.Specs() {
				kinds[s.Name] = gates.KindBuiltin
			}
			return reg, kinds, nil
		},
		Process: sandbox.Spec{KillGrace: 500 * time.Millisecond},
		Logf:    t.Logf,
	}
}

// newClient serves one connection with opts and initializes it.
func newClient(t testing.TB, opts Options) *client {
	t.Helper()
	c := newUninitialized(t, opts)
	var res InitializeResult
	c.call(MethodInitialize, InitializeParams{ClientName: "test", ProtocolVersion: 1}, &res)
	c.sendNote(MethodInitialized, struct{}{})
	return c
}

// newUninitialized serves one connection with opts.
func newUninitialized(t testing.TB, opts Options) *client {
	t.Helper()
	cr, sw := io.Pipe() // server → client
	sr, cw := io.Pipe() // client → server
	c := &client{t: t, w: cw, waits: map[string]chan *Message{}, notes: make(chan *Message, 100000), done: make(chan error, 1), seqs: map[string]int64{}}
	srv := NewServer(opts)
	go func() {
		c.done <- srv.Serve(context.Background(), sr, sw)
		sw.Close()
	}()
	go func() {
		sc := bufio.NewScanner(cr)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var m Message
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("server sent a line that is not JSON: %q", sc.Bytes())
				continue
			}
			if m.Method == "" {
				c.mu.Lock()
				ch := c.waits[string(m.ID)]
				delete(c.waits, string(m.ID))
				c.mu.Unlock()
				if ch != nil {
					ch <- &m
					continue
				}
			}
			c.checkOrder(&m)
			c.notes <- &m
		}
		close(c.notes)
	}()
	t.Cleanup(func() { c.close() })
	return c
}

// close ends the connection and waits for Serve to return.
func (c *client) close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.w.Close()
	select {
	case err := <-c.done:
		return err
	case <-time.After(30 * time.Second):
		c.t.Errorf("Serve did not return within 30s of the client closing")
		return nil
	}
}

func (c *client) writeLine(b []byte) {
	c.t.Helper()
	if _, err := c.w.Write(append(b, '\n')); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// request sends method and returns the response message.
func (c *client) request(method string, params any) *Message {
	c.t.Helper()
	c.mu.Lock()
	c.nextID++
	id := fmt.Sprint(c.nextID)
	ch := make(chan *Message, 1)
	c.waits[id] = ch
	c.mu.Unlock()
	p, _ := json.Marshal(params)
	b, _ := json.Marshal(Message{JSONRPC: "2.0", ID: json.RawMessage(id), Method: method, Params: p})
	c.writeLine(b)
	select {
	case m := <-ch:
		return m
	case <-time.After(60 * time.Second):
		c.t.Fatalf("%s: no response within 60s", method)
		return nil
	}
}

// call sends method and decodes its result into out; an error fails t.
func (c *client) call(method string, params, out any) {
	c.t.Helper()
	m := c.request(method, params)
	if m.Error != nil {
		c.t.Fatalf("%s: error %d: %s (data %v)", method, m.Error.Code, m.Error.Message, m.Error.Data)
	}
	if out != nil {
		if err := json.Unmarshal(m.Result, out); err != nil {
			c.t.Fatalf("%s: result %s: %v", method, m.Result, err)
		}
	}
}

// callErr sends method and returns its error (nil when it succeeded).
func (c *client) callErr(method string, params any) *Error {
	c.t.Helper()
	return c.request(method, params).Error
}

func (c *client) sendNote(method string, params any) {
	c.t.Helper()
	p, _ := json.Marshal(params)
	b, _ := json.Marshal(Message{JSONRPC: "2.0", Method: method, Params: p})
	c.writeLine(b)
}

// respond answers the server request m.
func (c *client) respond(m *Message, result any, rerr *Error) {
	c.t.Helper()
	var r json.RawMessage
	if rerr == nil {
		r, _ = json.Marshal(result)
	}
	b, _ := json.Marshal(Message{JSONRPC: "2.0", ID: m.ID, Result: r, Error: rerr})
	c.writeLine(b)
}

// next returns the first notification or server request for which keep
// returns true, or fails t after d. The others stay queued, in order, for
// later calls.
func (c *client) next(d time.Duration, keep func(*Message) bool) *Message {
	c.t.Helper()
	for i, m := range c.backlog {
		if keep(m) {
			c.backlog = append(c.backlog[:i:i], c.backlog[i+1:]...)
			return m
		}
	}
	deadline := time.After(d)
	for {
		select {
		case m, ok := <-c.notes:
			if !ok {
				c.t.Fatalf("connection closed while waiting")
			}
			if keep(m) {
				return m
			}
			c.backlog = append(c.backlog, m)
		case <-deadline:
			c.t.Fatalf("nothing matching within %v", d)
			return nil
		}
	}
}

func isMethod(method string) func(*Message) bool {
	return func(m *Message) bool { return m.Method == method }
}

// output collects a process's output until process/exited, checking that
// seqs increase by one and that nothing comes after the exit.
type output struct {
	stdout, stderr []byte
	exited         ProcessExitedParams
	chunks         int
}

func (c *client) collect(processID string, d time.Duration) output {
	c.t.Helper()
	var o output
	for {
		m := c.next(d, func(m *Message) bool {
			var p struct {
				ProcessID string `json:"processId"`
			}
			json.Unmarshal(m.Params, &p)
			return p.ProcessID == processID && (m.Method == MethodProcessOutput || m.Method == MethodProcessExited)
		})
		if m.Method == MethodProcessExited {
			json.Unmarshal(m.Params, &o.exited)
			return o
		}
		var p ProcessOutputParams
		json.Unmarshal(m.Params, &p)
		o.chunks++
		if p.Stream == "stdout" {
			o.stdout = append(o.stdout, p.Chunk...)
		} else {
			o.stderr = append(o.stderr, p.Chunk...)
		}
	}
}

// openSandbox opens a sandbox on backend with a fresh workspace.
func (c *client) openSandbox(id, backend string, writable bool) (string, SandboxOpenResult) {
	c.t.Helper()
	ws := traversableTempDir(c.t)
	var res SandboxOpenResult
	c.call(MethodSandboxOpen, SandboxOpenParams{SandboxID: id, Backend: backend, Workspace: ws, WritableWorkspace: writable}, &res)
	return ws, res
}

// run starts argv in sandbox sb and returns its output.
func (c *client) run(sb, processID string, argv ...string) output {
	c.t.Helper()
	c.call(MethodProcessStart, ProcessStartParams{ProcessID: processID, SandboxID: sb, Argv: argv}, nil)
	return c.collect(processID, 60*time.Second)
}

// backends are the backends the process tests run on: local always,
// bwrap and docker when they can run here (CI requires them: see
// GATEBRIDGE_REQUIRE_BACKENDS).
func testBackends(t *testing.T) []string {
	out := []string{sandbox.LocalName}
	if err := sandbox.NewBwrap().Check(context.Background()); err == nil {
		out = append(out, sandbox.BwrapName)
	} else if os.Getenv("GATEBRIDGE_REQUIRE_BACKENDS") != "" {
		t.Fatalf("bwrap is required here (GATEBRIDGE_REQUIRE_BACKENDS) but cannot run: %v", err)
	} else {
		t.Logf("bwrap skipped: %v", err)
	}
	return out
}

// sleepers lists host processes whose command line holds marker.
func sleepers(marker string) []string {
	out, _ := exec.Command("pgrep", "-af", marker).Output()
	var ps []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" && !strings.Contains(l, "pgrep") {
			ps = append(ps, l)
		}
	}
	return ps
}

// traversableTempDir is a temp dir that a command running as another uid
// (gatebridge is root: nobody) can reach.
func traversableTempDir(t testing.TB) string {
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	return d
}
