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
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/bridge/rpc/rpctest"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

const listenToken = "tok-7f3a9c0b5e21d84a6c3f9e07b1d2a5c8"

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
	return startListenerOn(t, ln, lo)
}

// startListenerOn is startListener on ln.
func startListenerOn(t *testing.T, ln net.Listener, lo ListenOptions) *testListener {
	t.Helper()
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
		{"wrong token", initLine(`"clientName":"x","protocolVersion":1,"authToken":"tok-guess-0b5e21d84a6c3f9e07b1d2a5c8"`), "wrong authToken", "7"},
		{"token prefix", initLine(`"clientName":"x","protocolVersion":1,"authToken":"` + listenToken[:len(listenToken)-1] + `"`), "wrong authToken", "7"},
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

// MaxConns counts authenticated connections only: connections in their
// handshake do not take a slot; one more token holder gets -32003 (the
// answer to its initialize) and is closed; a slot freed is usable again.
func TestListenMaxConns(t *testing.T) {
	l := startListener(t, ListenOptions{MaxConns: 2, HandshakeTimeout: time.Minute})
	for range 5 {
		l.dial() // in their handshake: no slot taken
	}
	_, first := l.connect(listenToken)
	l.connect(listenToken)
	nc := l.dial()
	io.WriteString(nc, initLine(`"clientName":"x","protocolVersion":1,"authToken":"`+listenToken+`"`))
	m := rpctest.Refused(t, nc, 10*time.Second)
	if m.Error.Code != CodeLimit || !strings.Contains(m.Error.Message, "too many connections: 2") || string(m.ID) != "7" {
		t.Fatalf("id %s %+v", m.ID, m.Error)
	}
	first.Close()
	// The slot is free once the first connection's Serve has returned.
	if !sandboxtest.Poll(10*time.Second, func() bool { return authenticates(l.dial()) }) {
		t.Fatalf("no slot after a client left; log:\n%s", l.logs())
	}
}

// authenticates sends initialize with the token on nc, and reports
// whether it was answered with a result; it closes nc.
func authenticates(nc net.Conn) bool {
	defer nc.Close()
	io.WriteString(nc, initLine(`"clientName":"x","protocolVersion":1,"authToken":"`+listenToken+`"`))
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, _ := bufio.NewReader(nc).ReadBytes('\n')
	var m Message
	return json.Unmarshal(line, &m) == nil && m.Error == nil && m.Result != nil
}

// idle opens n connections that send nothing, and waits until the
// listener has accepted them all (entered counts the handshakes begun).
func (l *testListener) idle(n int, entered *atomic.Int64) []net.Conn {
	l.t.Helper()
	want := entered.Load() + int64(n)
	var conns []net.Conn
	for range n {
		conns = append(conns, l.dial())
	}
	if !sandboxtest.Poll(10*time.Second, func() bool { return entered.Load() >= want }) {
		l.t.Fatalf("accepted %d of %d connections", entered.Load(), want)
	}
	return conns
}

// The attack of issue 26 item 3: idle connections without the token, far
// more than every cap, renewed. They used to fill --max-connections, and
// the token holder got -32003. Now they cannot keep the token holder out:
// each new connection closes the oldest pending one (which is told so),
// and only authenticated connections count against MaxConns.
func TestListenIdleFloodDoesNotStarve(t *testing.T) {
	var entered atomic.Int64
	t.Cleanup(SetHandshakeHook(func() { entered.Add(1) }))
	l := startListener(t, ListenOptions{MaxConns: 4, MaxPending: 8, MaxPendingPerSource: 4, HandshakeTimeout: time.Minute})
	flood := l.idle(40, &entered)
	var last []net.Conn
	for round := range 3 {
		last = l.idle(20, &entered) // renewed
		c, _ := l.connect(listenToken)
		c.Call(MethodProcessList, struct{}{}, nil)
		if round == 0 {
			l.connect(listenToken) // a second one at once
		}
	}
	if n := l.served.Load(); n != 4 {
		t.Fatalf("%d connections served, want the 4 token holders", n)
	}
	// The flood was closed to make room: the first few are told why
	// (MaxPending at once), the rest just closed. The newest idle
	// connections are still open, within the caps (the last token holder
	// took the place of a fourth).
	told := 0
	for i, nc := range flood {
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, err := io.ReadAll(nc)
		if err != nil {
			t.Fatalf("flood connection %d: %v; want it closed", i, err)
		}
		if len(b) > 0 {
			var m Message
			if json.Unmarshal(b, &m) != nil || m.Error == nil || m.Error.Code != CodeLimit || !strings.Contains(m.Error.Message, "waiting to authenticate") {
				t.Fatalf("flood connection %d got %q", i, b)
			}
			told++
		}
	}
	if told == 0 {
		t.Error("no flood connection was told why it was closed")
	}
	for i, nc := range last[len(last)-3:] {
		nc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if n, err := nc.Read(make([]byte, 1)); n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("idle connection %d of the last 3: read %d, %v; want it still open", i, n, err)
		}
	}
	logs := l.logs()
	if !strings.Contains(logs, "refused: closed to make room for a newer connection (at most 8 wait to authenticate, 4 per source; its source: local)") {
		t.Errorf("log:\n%s", logs)
	}
}

// Which pending connection is closed to make room, when the token holder
// is not the newest: the kernel tells idle connections from a client at
// work, which stays.
func TestListenEvictsIdleFirst(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the kernel's counts of a connection's bytes are read on Linux only")
	}
	const perSource = 4
	opts := ListenOptions{MaxPending: perSource, MaxPendingPerSource: perSource, HandshakeTimeout: time.Minute}
	initialize := initLine(`"clientName":"x","protocolVersion":1,"authToken":"` + listenToken + `"`)

	// Its line came, and the server has not read it yet (its reads wait
	// here until the flood is in): it is about to authenticate.
	t.Run("line unread", func(t *testing.T) {
		var entered atomic.Int64
		release := make(chan struct{})
		t.Cleanup(SetHandshakeHook(func() { entered.Add(1); <-release }))
		l := startListener(t, opts)
		nc := l.dial()
		io.WriteString(nc, initialize)
		if !sandboxtest.Poll(10*time.Second, func() bool { return entered.Load() == 1 }) {
			t.Fatal("not accepted")
		}
		l.idle(3*perSource, &entered)
		close(release)
		c := rpctest.New(t, nc, nc)
		c.Call(MethodProcessList, struct{}{}, nil)
	})

	// Half its line came, and was read (a TLS handshake in progress looks
	// the same): idle connections go first.
	t.Run("line in pieces", func(t *testing.T) {
		t.Cleanup(SetIdleAfter(50 * time.Millisecond))
		var entered atomic.Int64
		t.Cleanup(SetHandshakeHook(func() { entered.Add(1) }))
		l := startListener(t, opts)
		nc := l.dial()
		io.WriteString(nc, initialize[:20])
		if !sandboxtest.Poll(10*time.Second, func() bool { return entered.Load() == 1 }) {
			t.Fatal("not accepted")
		}
		l.idle(perSource-1, &entered) // the pool is full
		time.Sleep(150 * time.Millisecond)
		l.idle(perSource-1, &entered) // each closes an idle one
		io.WriteString(nc, initialize[20:])
		c := rpctest.New(t, nc, nc)
		c.Call(MethodProcessList, struct{}{}, nil)
	})

	// A client that just connected has sent nothing yet, and is not idle:
	// connections of an attacker that sends a byte each, older, go first.
	t.Run("just connected", func(t *testing.T) {
		t.Cleanup(SetIdleAfter(time.Minute))
		var entered atomic.Int64
		t.Cleanup(SetHandshakeHook(func() { entered.Add(1) }))
		l := startListener(t, opts)
		for _, c := range l.idle(perSource, &entered) {
			io.WriteString(c, "{")
		}
		time.Sleep(100 * time.Millisecond) // the server reads those bytes
		nc := l.dial()
		if !sandboxtest.Poll(10*time.Second, func() bool { return entered.Load() == perSource+1 }) {
			t.Fatal("not accepted")
		}
		l.idle(1, &entered)
		io.WriteString(nc, initialize)
		c := rpctest.New(t, nc, nc)
		c.Call(MethodProcessList, struct{}{}, nil)
	})
}

// Sources: an attacker on this host (any loopback address) floods the
// pending pool; a client from elsewhere, pending the whole time and
// sending its line only after the flood, is not closed to make room. (A
// connection pair in memory stands for TCP, with the addresses chosen.)
func TestListenPerSource(t *testing.T) {
	ln := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	l := startListenerOn(t, ln, ListenOptions{MaxPending: 6, MaxPendingPerSource: 3, HandshakeTimeout: time.Minute})
	far := ln.dial(t, "10.1.0.7")
	far2 := ln.dial(t, "2001:db8:1::7")
	for i := range 60 {
		// Every address of 127.0.0.0/8 is this host; so is the server's
		// own address; another address of the same /64 is the same source.
		from := []string{fmt.Sprintf("127.0.%d.%d", i/200, i%200+1), "10.1.0.1", "2001:db8::1:2"}[i%3]
		go io.Copy(io.Discard, ln.dial(t, from))
	}
	for _, c := range []net.Conn{far, far2} {
		rc := rpctest.New(t, c, c)
		rc.Call(MethodInitialize, InitializeParams{ClientName: "far", ProtocolVersion: ProtocolVersion, AuthToken: listenToken}, nil)
		rc.Call(MethodProcessList, struct{}{}, nil)
	}
	logs := l.logs()
	for _, want := range []string{"10.1.0.1:40000: refused: closed to make room for a newer connection (at most 6 wait to authenticate, 3 per source; its source: local)",
		"127.0.0.1:40000: refused: closed to make room for a newer connection (at most 6 wait to authenticate, 3 per source; its source: local)",
		"[2001:db8::1:2]:40000: refused: closed to make room for a newer connection (at most 6 wait to authenticate, 3 per source; its source: 2001:db8::/64)"} {
		if !strings.Contains(logs, want) {
			t.Errorf("no eviction %q; log:\n%s", want, logs)
		}
	}
	if n := strings.Count(logs, ": refused: "); n != strings.Count(logs, "its source: local)")+strings.Count(logs, "its source: 2001:db8::/64)") {
		t.Errorf("evictions from other sources; log:\n%s", logs)
	}
}

// pipeListener hands out the server ends of in-memory connections whose
// addresses the test chooses.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

var pipeServerAddr = &net.TCPAddr{IP: net.ParseIP("10.1.0.1"), Port: 7800}

func (p *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.done:
		return nil, net.ErrClosed
	}
}

func (p *pipeListener) Close() error {
	p.once.Do(func() { close(p.done) })
	return nil
}

func (p *pipeListener) Addr() net.Addr { return pipeServerAddr }

// dial connects from ip and returns the client's end, once accepted.
func (p *pipeListener) dial(t *testing.T, ip string) net.Conn {
	t.Helper()
	server, client := net.Pipe()
	t.Cleanup(func() { client.Close() })
	p.conns <- addrConn{server, &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}}
	return client
}

// addrConn is a connection from remote to pipeServerAddr.
type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c addrConn) LocalAddr() net.Addr  { return pipeServerAddr }
func (c addrConn) RemoteAddr() net.Addr { return c.remote }

// Refusals are logged at a rate limit: an attacker's connections make at
// most LogBurst lines per window, then a line counting the rest. A
// connection closed before sending anything is counted too.
func TestListenLogRateLimited(t *testing.T) {
	const window = 2 * time.Second
	t.Cleanup(SetLogWindow(window))
	l := startListener(t, ListenOptions{})
	start := time.Now()
	const refused, silent = 3 * LogBurst, 5
	for range refused {
		nc := l.dial()
		io.WriteString(nc, "hello\n")
		rpctest.Refused(t, nc, 10*time.Second)
	}
	for range silent {
		l.dial().Close()
	}
	countOf := func(re *regexp.Regexp) (n int) {
		for _, m := range re.FindAllStringSubmatch(l.logs(), -1) {
			k, _ := strconv.Atoi(m[1])
			n += k
		}
		return n
	}
	notLogged := regexp.MustCompile(`serve: (\d+) more connections refused in the last 2s, not logged`)
	closed := regexp.MustCompile(`serve: (\d+) connections closed before sending anything in the last 2s \(the last from 127\.0\.0\.1:\d+\)`)
	if !sandboxtest.Poll(3*window, func() bool {
		return strings.Count(l.logs(), ": refused: ")+countOf(notLogged) == refused && countOf(closed) == silent
	}) {
		t.Fatalf("log:\n%s", l.logs())
	}
	windows := int(time.Since(start)/window) + 1
	if n := strings.Count(l.logs(), ": refused: "); n > LogBurst*windows {
		t.Fatalf("%d refusals logged in %d windows of %v; log:\n%s", n, windows, window, l.logs())
	}
}

// The review's attack: wrong tokens are not rate limited, and one local
// process tried 8,000 a second, so a short token falls to guessing. Here
// the token is two hex digits and a client tries all 256: ServeListener
// must refuse such a token before it serves anyone.
func TestListenRefusesWeakToken(t *testing.T) {
	for _, weak := range []string{"c3", listenToken[:MinTokenBytes-1]} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		srv := NewServer(testOptions(t))
		done := make(chan error, 1)
		go func() { done <- ServeListener(ctx, ln, ListenOptions{Token: weak}, srv.Serve) }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("the token is %d bytes long, shorter than 32", len(weak))) {
				t.Fatalf("token %q: ServeListener returned %v", weak, err)
			}
			continue
		case <-time.After(5 * time.Second):
		}
		if len(weak) > 2 {
			t.Fatalf("ServeListener serves a %d-byte token", len(weak))
		}
		for i := range 256 {
			guess := fmt.Sprintf("%02x", i)
			nc, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			nc.SetDeadline(time.Now().Add(5 * time.Second))
			io.WriteString(nc, initLine(`"clientName":"guesser","protocolVersion":1,"authToken":"`+guess+`"`))
			line, _ := bufio.NewReader(nc).ReadString('\n')
			nc.Close()
			if strings.Contains(line, `"result"`) {
				t.Fatalf("ServeListener served the 2-byte token %q: a client guessed it in %d tries", weak, i+1)
			}
		}
		t.Fatalf("ServeListener served the 2-byte token %q", weak)
	}
}
