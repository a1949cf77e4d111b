package rpc_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/bridge/rpc/rpctest"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

const listenToken = "tok-7f3a9c"

// testListener is ServeListener on a loopback port, serving connections
// with a Server of testOptions.
type testListener struct {
	t      *testing.T
	addr   string
	cancel context.CancelFunc
	done   chan error
	served atomic.Int32 // connections handed to Serve
	logMu  sync.Mutex
	log    strings.Builder
}

func startListener(t *testing.T, lo ListenOptions) *testListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &testListener{t: t, addr: ln.Addr().String(), done: make(chan error, 1)}
	if lo.Token == "" {
		lo.Token = listenToken
	}
	lo.Logf = func(format string, args ...any) {
		l.logMu.Lock()
		defer l.logMu.Unlock()
		l.log.WriteString(strings.TrimSpace(fmt.Sprintf(format, args...)) + "\n")
	}
	srv := NewServer(testOptions(t))
	var ctx context.Context
	ctx, l.cancel = context.WithCancel(context.Background())
	go func() {
		l.done <- ServeListener(ctx, ln, lo, func(ctx context.Context, r io.Reader, w io.Writer) error {
			l.served.Add(1)
			return srv.Serve(ctx, r, w)
		})
	}()
	t.Cleanup(func() { l.stop() })
	return l
}

// stop cancels ServeListener and waits for it to return.
func (l *testListener) stop() {
	l.t.Helper()
	l.cancel()
	select {
	case err := <-l.done:
		if err != nil {
			l.t.Errorf("ServeListener: %v", err)
		}
		l.done <- nil
	case <-time.After(30 * time.Second):
		l.t.Errorf("ServeListener did not return within 30s of its ctx being cancelled")
	}
}

func (l *testListener) logs() string {
	l.logMu.Lock()
	defer l.logMu.Unlock()
	return l.log.String()
}

func (l *testListener) dial() net.Conn {
	l.t.Helper()
	c, err := net.Dial("tcp", l.addr)
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { c.Close() })
	return c
}

// connect dials and initializes with token.
func (l *testListener) connect(token string) (*rpctest.Client, net.Conn) {
	l.t.Helper()
	nc := l.dial()
	c := rpctest.New(l.t, nc, nc)
	c.Call(MethodInitialize, InitializeParams{ClientName: "listen-test", ProtocolVersion: ProtocolVersion, AuthToken: token}, nil)
	c.Notify(MethodInitialized, struct{}{})
	return c, nc
}

func initLine(params string) string {
	return `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{` + params + `}}` + "\n"
}

// Everything but an initialize request with the token, as the first
// line, gets -32006 and a closed connection, and never reaches Serve; the
// log names the client's address, never a token.
func TestListenRefusesWithoutToken(t *testing.T) {
	l := startListener(t, ListenOptions{})
	for _, tc := range []struct {
		name, line, want string
		id               string
	}{
		{"wrong token", initLine(`"clientName":"x","protocolVersion":1,"authToken":"tok-guess"`), "wrong authToken", "7"},
		{"token prefix", initLine(`"clientName":"x","protocolVersion":1,"authToken":"tok-7f3a9"`), "wrong authToken", "7"},
		{"no token", initLine(`"clientName":"x","protocolVersion":1`), "no authToken", "7"},
		{"empty token", initLine(`"clientName":"x","protocolVersion":1,"authToken":""`), "no authToken", "7"},
		{"token of the wrong type", initLine(`"authToken":["` + listenToken + `"]`), "not a JSON-RPC request", "null"},
		{"another method first", `{"jsonrpc":"2.0","id":1,"method":"sandbox/open","params":{"sandboxId":"x","backend":"local","workspace":"/"}}` + "\n", "must be the initialize request", "1"},
		{"initialize as a notification", `{"jsonrpc":"2.0","method":"initialize","params":{"authToken":"` + listenToken + `"}}` + "\n", "must be the initialize request", "null"},
		{"not JSON", "hello\n", "not a JSON-RPC request", "null"},
		{"a batch", "[" + strings.TrimSpace(initLine(`"authToken":"`+listenToken+`"`)) + "]\n", "not a JSON-RPC request", "null"},
		{"no newline, then EOF", strings.TrimSpace(initLine(`"authToken":"` + listenToken + `"`)), "before the end of its first line", "null"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := l.dial()
			io.WriteString(nc, tc.line)
			if !strings.HasSuffix(tc.line, "\n") {
				nc.(*net.TCPConn).CloseWrite()
			}
			m := rpctest.Refused(t, nc, 10*time.Second)
			if m.Error.Code != CodeUnauthorized || !strings.Contains(m.Error.Message, tc.want) || string(m.ID) != tc.id {
				t.Fatalf("got id %s %+v, want id %s, -32006 saying %q", m.ID, m.Error, tc.id, tc.want)
			}
			if d, _ := m.Error.Data.(map[string]any); d["hint"] == nil {
				t.Errorf("no hint: %+v", m.Error)
			}
		})
	}
	if n := l.served.Load(); n != 0 {
		t.Fatalf("%d refused connections reached Serve", n)
	}
	logs := l.logs()
	if strings.Count(logs, ": refused: ") != 10 || !strings.Contains(logs, "gatebridge: serve: 127.0.0.1:") {
		t.Errorf("log:\n%s", logs)
	}
	if strings.Contains(logs, "tok-") {
		t.Errorf("the log holds a token:\n%s", logs)
	}
}

// With the token, the connection is served: the initialize line and what
// the client sent right behind it (before any answer) all reach Serve.
// Two clients have their own sandboxes; one leaving ends only its own,
// and stopping the listener ends the other.
func TestListenServes(t *testing.T) {
	l := startListener(t, ListenOptions{})
	nc := l.dial()
	m := marker()
	ws := traversableTempDir(t)
	pipelined := initLine(`"clientName":"x","protocolVersion":1,"authToken":"`+listenToken+`"`) +
		`{"jsonrpc":"2.0","method":"initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":8,"method":"sandbox/open","params":{"sandboxId":"sb","backend":"local","workspace":"` + ws + `"}}` + "\n" +
		`{"jsonrpc":"2.0","id":9,"method":"process/start","params":{"processId":"p","sandboxId":"sb","argv":["sh","-c","echo up; exec sleep ` + m + `"]}}` + "\n"
	if _, err := io.WriteString(nc, pipelined); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(nc)
	nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	answered := map[string]bool{}
	for !answered["7"] || !answered["8"] || !answered["9"] {
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatalf("reading the answers: %v; got %v", err, answered)
		}
		var msg Message
		json.Unmarshal(line, &msg)
		if msg.Error != nil {
			t.Fatalf("error: %s", line)
		}
		if msg.ID != nil {
			answered[string(msg.ID)] = true
		}
	}
	if !sandboxtest.Poll(10*time.Second, func() bool { return len(sleepers("sleep "+m)) == 1 }) {
		t.Fatal("the first client's process is not running")
	}

	other, _ := l.connect(listenToken)
	other.Call(MethodSandboxOpen, SandboxOpenParams{SandboxID: "sb", Backend: "local", Workspace: traversableTempDir(t)}, nil)
	m2 := marker() + "1"
	other.Call(MethodProcessStart, ProcessStartParams{ProcessID: "p", SandboxID: "sb", Argv: []string{"sleep", m2}}, nil)

	nc.Close()
	if !sandboxtest.Poll(20*time.Second, func() bool { return len(sleepers("sleep "+m)) == 0 }) {
		t.Fatalf("the first client left, its process still runs: %v", sleepers("sleep "+m))
	}
	if len(sleepers("sleep "+m2)) != 1 {
		t.Fatal("the other client's process went with the first client")
	}
	var list ProcessListResult
	other.Call(MethodProcessList, struct{}{}, &list)

	l.stop()
	if left := sleepers("sleep " + m2); len(left) > 0 {
		t.Fatalf("running after the listener stopped: %v", left)
	}
	select {
	case <-other.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the other connection is still open after the listener stopped")
	}
	logs := l.logs()
	if strings.Count(logs, ": connected") != 2 || !strings.Contains(logs, ": disconnected") || !strings.Contains(logs, ": closed: the server is stopping") {
		t.Errorf("log:\n%s", logs)
	}
}

// A first line longer than MaxHandshakeBytes is refused as soon as that
// many bytes have come, without waiting for more or for the timeout; a
// client that keeps sending is cut off: the server does not read on.
func TestListenHugeFirstLine(t *testing.T) {
	l := startListener(t, ListenOptions{HandshakeTimeout: time.Minute})
	junk := bytes.Repeat([]byte("x"), DefaultMaxHandshakeBytes)

	// Exactly the limit, no newline, then nothing: refused at once.
	nc := l.dial()
	start := time.Now()
	if _, err := nc.Write(junk); err != nil {
		t.Fatal(err)
	}
	m := rpctest.Refused(t, nc, 10*time.Second)
	if m.Error.Code != CodeUnauthorized || !strings.Contains(m.Error.Message, "over 65536 bytes") {
		t.Fatalf("%+v", m.Error)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("refused after %v: it waited for something", d)
	}

	// One byte short: not refused yet (it may still end the line).
	nc = l.dial()
	nc.Write(junk[1:])
	nc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := nc.Read(make([]byte, 1)); n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a line of %d bytes so far: read %d, %v; want nothing yet", len(junk)-1, n, err)
	}

	// A client that streams: its writes fail long before 64 MiB.
	nc = l.dial()
	nc.(*net.TCPConn).SetWriteBuffer(64 << 10)
	var sent atomic.Int64
	wrote := make(chan error, 1)
	go func() {
		chunk := bytes.Repeat([]byte("y"), 64<<10)
		for sent.Load() < 64<<20 {
			nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			n, err := nc.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	m = rpctest.Refused(t, nc, 10*time.Second)
	if m.Error.Code != CodeUnauthorized {
		t.Fatalf("%+v", m.Error)
	}
	if err := <-wrote; err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the client wrote %d bytes (%v): the server went on reading, or stalled it instead of closing", sent.Load(), err)
	}
	if n := sent.Load(); n > 16<<20 {
		t.Fatalf("the client wrote %d bytes before the server closed", n)
	}
	t.Logf("the streaming client got to write %d bytes (socket buffers included)", sent.Load())
}

// A client that sends nothing, or trickles bytes, is dropped when the
// handshake's time is up: the deadline counts from the connection, not
// from the last byte.
func TestListenHandshakeTimeout(t *testing.T) {
	const timeout = 400 * time.Millisecond
	l := startListener(t, ListenOptions{HandshakeTimeout: timeout})
	for _, trickle := range []bool{false, true} {
		nc := l.dial()
		start := time.Now()
		if trickle {
			go func() {
				for _, b := range []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize"`) {
					if _, err := nc.Write([]byte{b}); err != nil {
						return
					}
					time.Sleep(timeout / 8)
				}
			}()
		}
		m := rpctest.Refused(t, nc, 10*time.Second)
		d := time.Since(start)
		if m.Error.Code != CodeUnauthorized || !strings.Contains(m.Error.Message, "no initialize request within 400ms") {
			t.Fatalf("trickle %v: %+v", trickle, m.Error)
		}
		if d < timeout-50*time.Millisecond || d > timeout+3*time.Second { // it counts from the accept, a little before dial returns here
			t.Fatalf("trickle %v: dropped after %v, want about %v", trickle, d, timeout)
		}
	}
	// An authenticated client has no such deadline.
	c, _ := l.connect(listenToken)
	time.Sleep(2 * timeout)
	c.Call(MethodProcessList, struct{}{}, nil)
}

// MaxConns counts every open connection, authenticated or not: one more
// gets -32003 and is closed; a slot freed is usable again.
func TestListenMaxConns(t *testing.T) {
	l := startListener(t, ListenOptions{MaxConns: 2, HandshakeTimeout: time.Minute})
	_, first := l.connect(listenToken)
	l.dial() // in its handshake: it holds a slot too
	m := rpctest.Refused(t, l.dial(), 10*time.Second)
	if m.Error.Code != CodeLimit || !strings.Contains(m.Error.Message, "too many connections: 2") {
		t.Fatalf("%+v", m.Error)
	}
	first.Close()
	// The slot is free once the first connection's Serve has returned.
	if !sandboxtest.Poll(10*time.Second, func() bool {
		nc := l.dial()
		defer nc.Close()
		io.WriteString(nc, initLine(`"clientName":"x","protocolVersion":1,"authToken":"`+listenToken+`"`))
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, _ := bufio.NewReader(nc).ReadBytes('\n')
		var m Message
		return json.Unmarshal(line, &m) == nil && m.Error == nil && m.Result != nil
	}) {
		t.Fatalf("no slot after a client left; log:\n%s", l.logs())
	}
}
