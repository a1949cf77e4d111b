package rpc_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	. "github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/bridge/rpc/rpctest"
	"github.com/gatebridge/gatebridge/gates"
)

func TestBadInput(t *testing.T) {
	c := newClient(t, testOptions(t))
	next := func() *Message {
		return c.Next(5*time.Second, func(m *Message) bool { return m.Error != nil })
	}
	// A malformed line: -32700, and the connection goes on.
	c.WriteLine([]byte(`{"jsonrpc":"2.0","id":1,"method":`))
	if m := next(); m.Error.Code != CodeParseError || string(m.ID) != "null" {
		t.Fatalf("malformed line: %+v %s", m.Error, m.ID)
	}
	c.WriteLine([]byte(`[1,2,3]`))
	if m := next(); m.Error.Code != CodeParseError {
		t.Fatalf("array: %+v", m.Error)
	}
	c.WriteLine([]byte(`{"jsonrpc":"1.0","id":7,"method":"process/list"}`))
	if m := next(); m.Error.Code != CodeInvalidRequest || string(m.ID) != "7" {
		t.Fatalf("jsonrpc 1.0: %+v %s", m.Error, m.ID)
	}
	if e := c.CallErr("no/such", struct{}{}); e == nil || e.Code != CodeMethodNotFound || !strings.Contains(e.Message, "no/such") {
		t.Fatalf("unknown method: %+v", e)
	}
	// Bad params name the field.
	for _, tc := range []struct {
		method string
		params string
		want   string
	}{
		{MethodProcessStart, `{"processId":"p","sandboxId":"s","argv":"ls"}`, `"argv"`},
		{MethodProcessStart, `{"processId":"p","sandboxId":"s"}`, `"argv"`},
		{MethodProcessStart, `{"processId":"../x","sandboxId":"s","argv":["true"]}`, `"processId"`},
		{MethodProcessStart, `{"processId":"p","sandboxId":"s","argv":["true"],"bogus":1}`, `"bogus"`},
		{MethodSandboxOpen, `{"sandboxId":"s","backend":"local","workspace":"relative"}`, `"workspace"`},
		{MethodSandboxOpen, `{"sandboxId":"s","backend":"nosuch","workspace":"/"}`, `"backend"`},
		{MethodSandboxOpen, `{"sandboxId":"s","backend":"local","workspace":"/","image":"x"}`, `"image"`},
		{MethodGateRegister, `{"name":"a b"}`, `"name"`},
		{MethodGateRegister, `{"name":"ok","stdin":"sometimes"}`, `"stdin"`},
		{MethodProcessSignal, `{"processId":"p","signal":"STOP"}`, `no process`},
	} {
		m := c.Request(tc.method, json.RawMessage(tc.params))
		if m.Error == nil || !strings.Contains(m.Error.Message, tc.want) {
			t.Errorf("%s %s: %+v, want an error naming %s", tc.method, tc.params, m.Error, tc.want)
		} else if tc.want != "no process" && m.Error.Code != CodeInvalidParams {
			t.Errorf("%s %s: code %d, want %d", tc.method, tc.params, m.Error.Code, CodeInvalidParams)
		}
	}
	// Still serving.
	var list ProcessListResult
	c.Call(MethodProcessList, struct{}{}, &list)
}

func TestNotInitializedAndVersion(t *testing.T) {
	opts := testOptions(t)
	c := newClient(t, opts)
	// A second initialize is refused.
	if e := c.CallErr(MethodInitialize, InitializeParams{ProtocolVersion: 1}); e == nil {
		t.Fatal("second initialize accepted")
	}
	// A fresh connection: requests before initialize, then a bad version.
	raw := newUninitialized(t, opts)
	if e := raw.CallErr(MethodProcessList, struct{}{}); e == nil || e.Code != CodeNotInitialized {
		t.Fatalf("before initialize: %+v", e)
	}
	e := raw.CallErr(MethodInitialize, InitializeParams{ClientName: "x", ProtocolVersion: 99})
	if e == nil || !strings.Contains(e.Message, "[1]") {
		t.Fatalf("version 99: %+v", e)
	}
}

// A message over the cap is refused with -32600 while it streams past:
// the server never holds it (its heap stays far below the message's size),
// and the connection goes on.
func TestMessageTooLarge(t *testing.T) {
	opts := testOptions(t)
	opts.MaxMessageBytes = 1 << 20
	c := newClient(t, opts)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	big := 64 << 20
	head, end := `{"jsonrpc":"2.0","id":99,"method":"process/write","params":{"processId":"p","chunk":"`, "\"}}\n"
	line := make([]byte, 0, len(head)+big+len(end))
	line = append(line, head...)
	line = line[:len(head)+big]
	for i := len(head); i < len(line); i++ {
		line[i] = 'A'
	}
	line = append(line, end...)
	go c.w.Write(line)
	m := c.Next(30*time.Second, func(m *Message) bool { return m.Error != nil })
	if m.Error.Code != CodeInvalidRequest || !strings.Contains(m.Error.Message, "too large") {
		t.Fatalf("got %+v", m.Error)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	// The test itself made one 64 MiB line; the server must not have made
	// another (nor its base64 decoding, 48 MiB).
	if grew := int64(after.TotalAlloc - before.TotalAlloc); grew > int64(big)+int64(big)/2 {
		t.Errorf("allocated %d MiB while refusing a %d MiB message", grew>>20, big>>20)
	}
	var list ProcessListResult
	c.Call(MethodProcessList, struct{}{}, &list)
}

func TestProcessLifecycle(t *testing.T) {
	for _, backend := range testBackends(t) {
		t.Run(backend, func(t *testing.T) {
			c := newClient(t, testOptions(t))
			_, open := c.openSandbox("sb", backend, true)
			if open.Backend != backend {
				t.Fatalf("backend %q, want %q", open.Backend, backend)
			}
			// Byte-exact output, both streams, binary bytes, exit code.
			o := c.Run("sb", "p1", nil, "sh", "-c", `printf 'a\000b\377\n'; printf 'to-err' >&2; exit 3`)
			if string(o.Stdout) != "a\x00b\xff\n" || string(o.Stderr) != "to-err" || o.Exited.ExitCode != 3 {
				t.Fatalf("stdout %q stderr %q exit %+v", o.Stdout, o.Stderr, o.Exited)
			}
			var w ProcessWaitResult
			c.Call(MethodProcessWait, ProcessWaitParams{ProcessID: "p1"}, &w)
			if w.Running || w.ExitCode == nil || *w.ExitCode != 3 {
				t.Fatalf("wait: %+v", w)
			}
			// process/read replays everything after a seq.
			var r ProcessReadResult
			c.Call(MethodProcessRead, ProcessReadParams{ProcessID: "p1", AfterSeq: 0}, &r)
			var all []byte
			for _, ch := range r.Chunks {
				if ch.Stream == "stdout" {
					all = append(all, ch.Chunk...)
				}
			}
			if string(all) != "a\x00b\xff\n" || !r.Exited || r.ExitCode == nil || *r.ExitCode != 3 {
				t.Fatalf("read: %+v", r)
			}
			// Files persist across the sandbox's processes; cwd is honoured.
			o = c.Run("sb", "p2", nil, "sh", "-c", "mkdir -p sub && echo kept > sub/f")
			if o.Exited.ExitCode != 0 {
				t.Fatalf("write: %+v %q", o.Exited, o.Stderr)
			}
			c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "p3", SandboxID: "sb", Argv: []string{"cat", "f"}, Cwd: "sub",
				Env: map[string]string{"X": "1"}}, nil)
			if o = c.Collect("p3", 30*time.Second, nil); string(o.Stdout) != "kept\n" {
				t.Fatalf("cwd sub: %q %q", o.Stdout, o.Stderr)
			}
			if e := c.CallErr(MethodProcessStart, ProcessStartParams{ProcessID: "p4", SandboxID: "sb", Argv: []string{"true"}, Cwd: "../.."}); e == nil || !strings.Contains(e.Message, "cwd") {
				t.Fatalf("cwd ../..: %+v", e)
			}
			// A gate is a command: read_file answers from the workspace;
			// submit's answer comes with the exit.
			o = c.Run("sb", "p5", nil, "sh", "-c", "cd sub && read_file f && submit 42")
			if string(o.Stdout) != "kept\n" || o.Exited.Answer == nil || *o.Exited.Answer != "42" {
				t.Fatalf("read_file, submit: %q %q %+v", o.Stdout, o.Stderr, o.Exited)
			}
			// ids are unique per connection.
			if e := c.CallErr(MethodProcessStart, ProcessStartParams{ProcessID: "p1", SandboxID: "sb", Argv: []string{"true"}}); e == nil || e.Code != CodeConflict {
				t.Fatalf("reused id: %+v", e)
			}
			var list ProcessListResult
			c.Call(MethodProcessList, struct{}{}, &list)
			if len(list.Processes) != 4 || list.Processes[0].ProcessID != "p1" || list.Processes[0].Running {
				t.Fatalf("list: %+v", list)
			}
		})
	}
}

func TestStdinSignalTimeout(t *testing.T) {
	for _, backend := range testBackends(t) {
		t.Run(backend, func(t *testing.T) {
			c := newClient(t, testOptions(t))
			c.openSandbox("sb", backend, false)
			// stdin: chunks in order, then EOF.
			c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "cat", SandboxID: "sb", Argv: []string{"sh", "-c", "cat; echo eof"}, Stdin: true}, nil)
			for i := 0; i < 50; i++ {
				c.Call(MethodProcessWrite, ProcessWriteParams{ProcessID: "cat", Chunk: []byte(fmt.Sprintf("%02d,", i))}, nil)
			}
			c.Call(MethodProcessCloseStdin, ProcessIDParams{ProcessID: "cat"}, nil)
			o := c.Collect("cat", 30*time.Second, nil)
			var want strings.Builder
			for i := 0; i < 50; i++ {
				fmt.Fprintf(&want, "%02d,", i)
			}
			if string(o.Stdout) != want.String()+"eof\n" {
				t.Fatalf("stdin: %q", o.Stdout)
			}
			if e := c.CallErr(MethodProcessWrite, ProcessWriteParams{ProcessID: "cat", Chunk: []byte("x")}); e == nil {
				t.Fatal("write after close accepted")
			}

			// A signal reaches the whole group: the trap runs.
			m := marker()
			c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "sig", SandboxID: "sb",
				Argv: []string{"sh", "-c", "trap 'echo got-term; exit 9' TERM; sleep " + m + " & echo ready; wait"}}, nil)
			c.Next(30*time.Second, rpctest.IsMethod(MethodProcessOutput))
			c.Call(MethodProcessSignal, ProcessSignalParams{ProcessID: "sig", Signal: "TERM"}, nil)
			o = c.Collect("sig", 30*time.Second, nil)
			if o.Exited.ExitCode != 9 || !strings.Contains(string(o.Stdout), "got-term") {
				t.Fatalf("TERM: %+v %q", o.Exited, o.Stdout)
			}
			// KILL: 137, signal KILL.
			c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "kill", SandboxID: "sb", Argv: []string{"sh", "-c", "echo ready; exec sleep " + m}}, nil)
			c.Next(30*time.Second, rpctest.IsMethod(MethodProcessOutput))
			c.Call(MethodProcessSignal, ProcessSignalParams{ProcessID: "kill", Signal: "KILL"}, nil)
			o = c.Collect("kill", 30*time.Second, nil)
			if o.Exited.ExitCode != 137 || o.Exited.Signal != "KILL" {
				t.Fatalf("KILL: %+v", o.Exited)
			}
			// A timeout.
			c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "slow", SandboxID: "sb", Argv: []string{"sleep", m}, TimeoutMs: 300}, nil)
			o = c.Collect("slow", 30*time.Second, nil)
			if !o.Exited.TimedOut || o.Exited.ExitCode != 124 {
				t.Fatalf("timeout: %+v", o.Exited)
			}
			var w ProcessWaitResult
			c.Call(MethodProcessWait, ProcessWaitParams{ProcessID: "slow"}, &w)
			if !w.TimedOut {
				t.Fatalf("wait after timeout: %+v", w)
			}
			if left := sleepers("sleep " + m); len(left) > 0 {
				t.Fatalf("left running: %v", left)
			}
		})
	}
}

func marker() string { return fmt.Sprint(400_000_000 + time.Now().UnixNano()%500_000_000) }

// process/wait with a timeout on a running process says running;
// process/read with waitMs returns as soon as output comes; the snapshot
// keeps head and tail of an output larger than the cap.
func TestWaitReadSnapshot(t *testing.T) {
	opts := testOptions(t)
	opts.MaxRetainedBytes = 2000
	opts.MaxReplayBytes = 4000
	c := newClient(t, opts)
	c.openSandbox("sb", "local", false)
	c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "p", SandboxID: "sb", Stdin: true,
		Argv: []string{"sh", "-c", `head -c 20000 /dev/zero | tr '\0' x; echo; echo END; read line; echo "$line"`}}, nil)
	var w ProcessWaitResult
	c.Call(MethodProcessWait, ProcessWaitParams{ProcessID: "p", TimeoutMs: 200}, &w)
	if !w.Running || w.ExitCode != nil {
		t.Fatalf("wait with timeout on a running process: %+v", w)
	}
	// Wait for END, then snapshot.
	for {
		m := c.Next(30*time.Second, rpctest.IsMethod(MethodProcessOutput))
		var p ProcessOutputParams
		json.Unmarshal(m.Params, &p)
		if bytes.Contains(p.Chunk, []byte("END")) {
			break
		}
	}
	var snap ProcessSnapshotResult
	c.Call(MethodProcessSnapshot, ProcessIDParams{ProcessID: "p"}, &snap)
	if !snap.Running || !snap.Truncated || snap.OmittedBytes < 18000 || !bytes.HasPrefix(snap.Stdout, []byte("xxxx")) || !bytes.Contains(snap.Stdout, []byte("END\n")) {
		t.Fatalf("snapshot: running %v truncated %v omitted %d stdout %d bytes (tail %q)", snap.Running, snap.Truncated, snap.OmittedBytes, len(snap.Stdout), tail(snap.Stdout))
	}
	// The replay buffer is capped: the first chunks are gone.
	var r ProcessReadResult
	c.Call(MethodProcessRead, ProcessReadParams{ProcessID: "p"}, &r)
	var n int
	for _, ch := range r.Chunks {
		n += len(ch.Chunk)
	}
	if n > 4000+32<<10 || r.NextSeq <= r.FirstSeq {
		t.Fatalf("read after 20 KB with a 4000-byte replay cap: %d bytes, first %d next %d", n, r.FirstSeq, r.NextSeq)
	}
	// A long poll returns when output comes.
	got := make(chan ProcessReadResult, 1)
	go func() {
		var r2 ProcessReadResult
		c.Call(MethodProcessRead, ProcessReadParams{ProcessID: "p", AfterSeq: r.NextSeq - 1, WaitMs: 20000}, &r2)
		got <- r2
	}()
	time.Sleep(100 * time.Millisecond)
	c.Call(MethodProcessWrite, ProcessWriteParams{ProcessID: "p", Chunk: []byte("late-line\n")}, nil)
	select {
	case r2 := <-got:
		if len(r2.Chunks) == 0 || !strings.Contains(string(r2.Chunks[0].Chunk), "late-line") {
			t.Fatalf("long poll: %+v", r2)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("long poll did not return when output came")
	}
}

func tail(b []byte) []byte {
	if len(b) > 20 {
		return b[len(b)-20:]
	}
	return b
}

// When the client goes away, every process is stopped and every sandbox
// removed: no process, no session directory is left.
func TestDisconnectCleansUp(t *testing.T) {
	for _, backend := range testBackends(t) {
		t.Run(backend, func(t *testing.T) {
			opts := testOptions(t)
			opts.Bridge.Dir = t.TempDir()
			c := newClient(t, opts)
			c.openSandbox("a", backend, false)
			c.openSandbox("b", backend, false)
			m := marker()
			for i, sb := range []string{"a", "b", "a"} {
				c.Call(MethodProcessStart, ProcessStartParams{ProcessID: fmt.Sprint("p", i), SandboxID: sb,
					Argv: []string{"sh", "-c", "sleep " + m + " & echo up; sleep " + m}}, nil)
				c.Next(30*time.Second, rpctest.IsMethod(MethodProcessOutput))
			}
			if len(sleepers("sleep "+m)) == 0 {
				t.Fatal("the test's processes are not running")
			}
			if err := c.close(); err != nil {
				t.Fatalf("Serve: %v", err)
			}
			if left := sleepers("sleep " + m); len(left) > 0 {
				t.Fatalf("left running after disconnect: %v", left)
			}
			ents, _ := os.ReadDir(opts.Bridge.Dir)
			if len(ents) > 0 {
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				t.Fatalf("left in the session dir: %v", names)
			}
		})
	}
}

// Caps: processes running at once; stdin queued but not read.
func TestCaps(t *testing.T) {
	opts := testOptions(t)
	opts.MaxProcesses = 2
	opts.MaxStdinQueued = 1000
	opts.MaxSandboxes = 1
	c := newClient(t, opts)
	c.openSandbox("sb", "local", false)
	if e := c.CallErr(MethodSandboxOpen, SandboxOpenParams{SandboxID: "sb2", Backend: "local", Workspace: t.TempDir()}); e == nil || e.Code != CodeLimit {
		t.Fatalf("second sandbox over maxSandboxes 1: %+v", e)
	}
	m := marker()
	for i := 0; i < 2; i++ {
		c.Call(MethodProcessStart, ProcessStartParams{ProcessID: fmt.Sprint("s", i), SandboxID: "sb", Argv: []string{"sleep", m}, Stdin: true}, nil)
	}
	if e := c.CallErr(MethodProcessStart, ProcessStartParams{ProcessID: "s3", SandboxID: "sb", Argv: []string{"true"}}); e == nil || e.Code != CodeLimit {
		t.Fatalf("third process over maxProcesses 2: %+v", e)
	}
	// sleep never reads: the queue fills (a pipe buffer's worth goes to
	// the kernel first), then writes are refused.
	var refused *Error
	for i := 0; i < 200 && refused == nil; i++ {
		refused = c.CallErr(MethodProcessWrite, ProcessWriteParams{ProcessID: "s0", Chunk: bytes.Repeat([]byte("z"), 900)})
	}
	if refused == nil || refused.Code != CodeLimit {
		t.Fatalf("180 KB to a process that never reads: %+v", refused)
	}
	c.Call(MethodProcessSignal, ProcessSignalParams{ProcessID: "s0", Signal: "KILL"}, nil)
	c.Collect("s0", 30*time.Second, nil)
	// A slot is free again.
	c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "s3", SandboxID: "sb", Argv: []string{"true"}}, nil)
}

func TestSandboxCloseStopsItsProcesses(t *testing.T) {
	c := newClient(t, testOptions(t))
	ws, _ := c.openSandbox("sb", "local", false)
	m := marker()
	c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "p", SandboxID: "sb", Argv: []string{"sh", "-c", "echo up; sleep " + m}}, nil)
	c.Next(30*time.Second, rpctest.IsMethod(MethodProcessOutput))
	c.Call(MethodSandboxClose, SandboxCloseParams{SandboxID: "sb"}, nil)
	o := c.Collect("p", 30*time.Second, nil)
	if o.Exited.ExitCode == 0 {
		t.Fatalf("exit %+v", o.Exited)
	}
	if left := sleepers("sleep " + m); len(left) > 0 {
		t.Fatalf("left running: %v", left)
	}
	if e := c.CallErr(MethodProcessStart, ProcessStartParams{ProcessID: "q", SandboxID: "sb", Argv: []string{"true"}}); e == nil || e.Code != CodeNotFound {
		t.Fatalf("start in a closed sandbox: %+v", e)
	}
	if _, err := os.Stat(filepath.Join(ws)); err != nil {
		t.Fatalf("the client's workspace is gone: %v", err)
	}
}

// TestStartAnsweredFirst: the response to process/start reaches the client
// before any process/output or process/exited of that process, also when
// the process ends at once and many start back to back.
func TestStartAnsweredFirst(t *testing.T) {
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- NewServer(testOptions(t)).Serve(context.Background(), sr, sw)
		sw.Close()
	}()
	send := func(id int, method string, params any) {
		p, _ := json.Marshal(params)
		b, _ := json.Marshal(Message{JSONRPC: "2.0", ID: json.RawMessage(fmt.Sprint(id)), Method: method, Params: p})
		if _, err := cw.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
	}
	lines := bufio.NewScanner(cr)
	lines.Buffer(nil, 1<<20)
	next := func() Message {
		if !lines.Scan() {
			t.Fatalf("the server ended: %v", lines.Err())
		}
		var m Message
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v", lines.Bytes(), err)
		}
		return m
	}
	send(1, MethodInitialize, InitializeParams{ClientName: "t", ProtocolVersion: 1})
	send(2, MethodSandboxOpen, SandboxOpenParams{SandboxID: "sb", Backend: "local", Workspace: traversableTempDir(t)})
	const n = 40
	for i := 0; i < n; i++ {
		send(10+i, MethodProcessStart, ProcessStartParams{ProcessID: fmt.Sprint("p", i), SandboxID: "sb", Argv: []string{"echo", "hi"}})
	}
	answered := map[string]bool{}
	for exited := 0; exited < n; {
		m := next()
		var p struct {
			ProcessID string `json:"processId"`
		}
		json.Unmarshal(m.Params, &p)
		switch {
		case m.Method == "" && m.Error != nil:
			t.Fatalf("error response %s: %+v", m.ID, m.Error)
		case m.Method == "":
			var id int
			json.Unmarshal(m.ID, &id)
			if id >= 10 {
				answered[fmt.Sprint("p", id-10)] = true
			}
		case m.Method == MethodProcessOutput || m.Method == MethodProcessExited:
			if !answered[p.ProcessID] {
				t.Fatalf("%s of %s before the response to its process/start", m.Method, p.ProcessID)
			}
			if m.Method == MethodProcessExited {
				exited++
			}
		}
	}
	cw.Close()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// Options.CheckWorkspace refuses sandbox/open on the resolved workspace
// (named through a link too) before anything is made for it: an *Error
// is the answer as is, another error a -32602 naming the workspace.
func TestCheckWorkspace(t *testing.T) {
	opts := testOptions(t)
	gatesMade := 0
	next := opts.Gates
	opts.Gates = func(ws, inside string, writable bool) (*gates.Registry, map[string]string, error) {
		gatesMade++
		return next(ws, inside, writable)
	}
	refused := traversableTempDir(t)
	link := filepath.Join(traversableTempDir(t), "link")
	if err := os.Symlink(refused, link); err != nil {
		t.Fatal(err)
	}
	opts.CheckWorkspace = func(ws string, writable bool) error {
		switch {
		case ws == refused:
			return &Error{Code: CodeInvalidParams, Message: "refusing workspace " + ws, Data: map[string]string{"hint": "keep it out"}}
		case writable:
			return errors.New("no writable workspace here")
		}
		return nil
	}
	c := newClient(t, opts)
	for _, ws := range []string{refused, link} {
		e := c.CallErr(MethodSandboxOpen, SandboxOpenParams{SandboxID: "a", Backend: "local", Workspace: ws})
		if e == nil || e.Code != CodeInvalidParams || e.Message != "refusing workspace "+refused {
			t.Fatalf("workspace %s: %+v", ws, e)
		}
	}
	other := traversableTempDir(t)
	e := c.CallErr(MethodSandboxOpen, SandboxOpenParams{SandboxID: "a", Backend: "local", Workspace: other, WritableWorkspace: true})
	if e == nil || e.Code != CodeInvalidParams || e.Message != `invalid params: "workspace" `+other+": no writable workspace here" {
		t.Fatalf("%+v", e)
	}
	if gatesMade != 0 {
		t.Fatalf("gates made %d times for refused workspaces", gatesMade)
	}
	c.Call(MethodSandboxOpen, SandboxOpenParams{SandboxID: "a", Backend: "local", Workspace: other}, nil)
}
