package rpc

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/gatebridge/gatebridge/internal/connpool"
)

// Defaults of ListenOptions fields left zero.
const (
	DefaultMaxConns            = 16
	DefaultMaxPending          = connpool.DefaultMax
	DefaultMaxPendingPerSource = connpool.DefaultMaxPerSource
	DefaultHandshakeTimeout    = 5 * time.Second
	DefaultMaxHandshakeBytes   = 64 << 10
)

// closeTimeout bounds writing the one error line to a client that is
// refused, and what is left to write to a connection when the server
// stops.
const closeTimeout = 2 * time.Second

// refuseDrainBytes bounds what is read and dropped from a refused client.
const refuseDrainBytes = 256 << 10

// MinTokenBytes is the shortest token [ServeListener] accepts (see
// [CheckToken]).
const MinTokenBytes = 32

// CheckToken says why token cannot guard a listener, or returns nil: it
// must be at least MinTokenBytes long.
//
// Wrong tokens are not rate limited (see [ServeListener]), and one local
// process tried 8,000 a second against serve --listen: a short token
// falls to guessing (a 4-digit one in about a second). The check sees
// only the length, not how random the token is: 32 bytes is the shortest
// common encoding of 128 random bits (openssl rand -hex 16; a UUID's hex
// digits carry 122), out of reach of any guessing rate, and longer than a
// password people type. It is a floor, not a measure of strength:
// openssl rand -hex 32 makes a good token.
func CheckToken(token string) error {
	if len(token) < MinTokenBytes {
		return fmt.Errorf("the token is %d bytes long, shorter than %d: one local process tries 8,000 tokens a second", len(token), MinTokenBytes)
	}
	return nil
}

// ListenOptions configure [ServeListener].
type ListenOptions struct {
	// Token is what initialize's authToken must be; [CheckToken] must
	// accept it.
	Token string
	// MaxConns caps the authenticated connections open at once; a token
	// holder past it is answered -32003 and closed. Connections still in
	// their handshake do not count.
	MaxConns int
	// MaxPending caps the connections still in their handshake (accepted,
	// not yet authenticated), and MaxPendingPerSource those of one source
	// (see [ServeListener]). Past either cap a new connection is not
	// refused: the oldest pending one is closed to make room.
	MaxPending          int
	MaxPendingPerSource int
	// HandshakeTimeout is how long a client has, from the moment it is
	// accepted, to send its first line (and, over TLS, to finish the TLS
	// handshake). It is not reset by the bytes that arrive.
	HandshakeTimeout time.Duration
	// MaxHandshakeBytes caps the first line, newline included.
	MaxHandshakeBytes int
	// Logf receives a line per connection authenticated and ended, and
	// per connection refused, naming the remote address (never the
	// token); nil discards them. Refusals are rate limited: at most 20
	// lines a minute, then a line counting the rest; connections closed
	// before sending a byte (probes, scans) are only counted, in a line
	// of their own once a minute.
	Logf func(format string, args ...any)
}

// ServeFunc serves one protocol connection: requests from r, responses to
// w, until r ends or ctx is cancelled; (*Server).Serve is one.
type ServeFunc func(ctx context.Context, r io.Reader, w io.Writer) error

// ServeListener accepts connections on ln (TCP, or TLS from
// tls.NewListener) and serves each one with serve, until ctx is cancelled
// or ln fails; then it closes ln, stops every connection and waits for
// their serve to return (each has removed what it started).
//
// Before serve sees a byte of a connection, ServeListener reads its first
// line itself, under tight bounds: at most MaxHandshakeBytes, within
// HandshakeTimeout. That line must be a JSON-RPC initialize request whose
// params.authToken is the token (compared in constant time). Anything
// else gets one error response (-32006) and the connection is closed; no
// connection state exists until then. The line, and whatever the client
// sent after it, is then passed to serve as the start of r, so initialize
// is answered as usual.
//
// # Who may hold a slot
//
// Only authenticated connections count against MaxConns: a client without
// the token cannot take a token holder's slot. Connections in their
// handshake are bounded apart (MaxPending, MaxPendingPerSource, the
// deadline), and a new one is never refused at the door: when a cap is
// reached, a pending connection of the new one's source (of the source
// with the most pending, when the whole pool is full) is closed instead,
// with -32003. Which one, on Linux, the kernel tells: the oldest that has
// sent nothing at all for 100 ms (idle); else the oldest with nothing
// unread (a TLS handshake in progress, a line sent in pieces, or a
// client that just connected); a connection whose line has come, unread
// yet, is about to authenticate and goes last. (Elsewhere: the oldest.)
//
// So idle connections, however many and however often renewed, never
// keep a token holder out: they are what is closed. To do it, an attacker
// must open MaxPendingPerSource connections from the token holder's own
// source between its connect and the arrival of its first line (a few
// microseconds for a client that writes at once; a round trip for TLS),
// every time. Refusing new connections when full would hand the door to
// whoever fills it first; counting pending ones against MaxConns, the
// token holders' slots.
//
// A source is the client's IP address (an IPv6 one by its /64), but every
// connection from this host is one source, "local": a loopback address
// (any of 127.0.0.0/8) or a connection to its own address. A sandbox
// sharing the host's (or a pod's) network namespace, and any local user,
// can pick among all of 127.0.0.0/8, so the address would tell nothing;
// as one source they can only evict each other, never a client from
// elsewhere.
//
// A client that closes its end ends only its own connection.
//
// # Guessing the token
//
// Wrong tokens are not slowed down: the token's length is the defence
// ([CheckToken] refuses one under MinTokenBytes). A delay per source after
// a wrong token would delay the token holder as much, since every
// connection from this host is one source and a pod's sandbox shares the
// token holder's loopback. Holding back only the answer to a wrong token
// (a right one is answered at once) does not slow a guesser that opens
// connections in parallel unless the connections held are capped, and at
// the cap one must either close a held connection early (the early close
// is the answer: wrong) or refuse new connections (which hands the door
// to the guesser, as above).
func ServeListener(ctx context.Context, ln net.Listener, opts ListenOptions, serve ServeFunc) error {
	if err := CheckToken(opts.Token); err != nil {
		ln.Close()
		return fmt.Errorf("rpc: ServeListener: %w", err)
	}
	setDefault(&opts.MaxConns, DefaultMaxConns)
	setDefault(&opts.MaxPending, DefaultMaxPending)
	setDefault(&opts.MaxPendingPerSource, min(DefaultMaxPendingPerSource, opts.MaxPending))
	setDefault(&opts.HandshakeTimeout, DefaultHandshakeTimeout)
	setDefault(&opts.MaxHandshakeBytes, DefaultMaxHandshakeBytes)
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	l := &listener{opts: opts, serve: serve, want: sha256.Sum256([]byte(opts.Token)),
		slots:    make(chan struct{}, opts.MaxConns),
		refusing: make(chan struct{}, opts.MaxPending),
		pending:  connpool.New(opts.MaxPending, opts.MaxPendingPerSource),
		log:      logLimit{logf: opts.Logf, burst: logBurst, window: logWindow},
	}
	l.readers.New = func() any { return bufio.NewReaderSize(nil, opts.MaxHandshakeBytes) }
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel() // stops every connection
		ln.Close()
		l.conns.Wait()
		l.log.stop()
	}()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	backoff := 5 * time.Millisecond
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if temporary(err) {
				time.Sleep(backoff) // out of file descriptors, say: some may close
				backoff = min(2*backoff, time.Second)
				continue
			}
			return fmt.Errorf("accept: %w", err)
		}
		backoff = 5 * time.Millisecond
		nc.SetDeadline(time.Now().Add(opts.HandshakeTimeout))
		pc := connpool.NewConn(nc, nil)
		l.pending.Add(pc)
		l.conns.Add(1)
		go func() {
			defer l.conns.Done()
			l.handle(ctx, pc)
		}()
	}
}

// temporary reports whether an Accept error may go away by itself.
func temporary(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

type listener struct {
	opts     ListenOptions
	serve    ServeFunc
	want     [sha256.Size]byte
	slots    chan struct{} // one per authenticated connection
	refusing chan struct{} // one per connection being told why it is closed
	pending  *connpool.Pool
	log      logLimit
	readers  sync.Pool // *bufio.Reader of MaxHandshakeBytes, for handshakes
	conns    sync.WaitGroup
}

// testHookHandshake, when set (by tests), runs on a connection's goroutine
// before it reads the handshake.
var testHookHandshake func()

// handle authenticates one connection, then serves it.
func (l *listener) handle(ctx context.Context, pc *connpool.Conn) {
	nc := pc.NC
	addr := nc.RemoteAddr().String()
	defer nc.Close()
	// The handshake's deadline (set at the accept) is absolute: a client
	// that trickles bytes is cut off as surely as a silent one. A
	// cancelled ctx ends it too, and so does an eviction.
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Now()) })
	defer stop()
	if testHookHandshake != nil {
		testHookHandshake()
	}
	first, id, err := l.authenticate(ctx, nc)
	// Out of the pending pool, whatever happened: from here the
	// connection is refused, or counts against MaxConns.
	evicted := !l.pending.Remove(pc)
	if err != nil {
		var ne net.Error
		switch {
		case ctx.Err() != nil:
			err = errors.New("the server is stopping")
		case evicted:
			l.log.refused(addr, "closed to make room for a newer connection (at most %d wait to authenticate, %d per source; its source: %s)", l.opts.MaxPending, l.opts.MaxPendingPerSource, pc.Source)
			l.refuse(nc, nil, &Error{Code: CodeLimit,
				Message: "too many connections waiting to authenticate: this one, among the oldest, was closed",
				Data:    map[string]string{"hint": "send initialize, with the server's token in params.authToken, as soon as the connection is open"}})
			return
		case errors.Is(err, errNothingSent):
			l.log.silentConn(addr) // a probe (a TCP readiness check, a port scan): counted only
			return
		case errors.As(err, &ne) && ne.Timeout():
			err = fmt.Errorf("no initialize request within %v", l.opts.HandshakeTimeout)
		}
		l.log.refused(addr, "%v", err)
		l.refuse(nc, id, &Error{Code: CodeUnauthorized, Message: "unauthorized: " + err.Error(),
			Data: map[string]string{"hint": "send initialize, with the server's token in params.authToken, as the first line"}})
		return
	}
	// An eviction racing with a handshake that succeeded changes nothing:
	// the connection has left the pool either way.
	nc.SetDeadline(time.Time{})
	stop()
	select {
	case l.slots <- struct{}{}:
		defer func() { <-l.slots }()
	default:
		l.log.refused(addr, "%d authenticated connections are open (the limit)", l.opts.MaxConns)
		l.refuse(nc, id, &Error{Code: CodeLimit,
			Message: fmt.Sprintf("too many connections: %d are open, the server's limit", l.opts.MaxConns),
			Data:    map[string]string{"hint": "close a connection or try again later; the server's limit is serve --max-connections"}})
		return
	}
	// From here the connection is the client's: a cancelled ctx stops
	// reading (serve then stops and removes what the connection started
	// and returns), and bounds the writing of what is left to say.
	stop = context.AfterFunc(ctx, func() {
		nc.SetReadDeadline(time.Now())
		nc.SetWriteDeadline(time.Now().Add(closeTimeout))
	})
	defer stop()
	l.opts.Logf("gatebridge: serve: %s: connected", addr)
	err = l.serve(ctx, io.MultiReader(bytes.NewReader(first), nc), nc)
	switch {
	case ctx.Err() != nil:
		l.opts.Logf("gatebridge: serve: %s: closed: the server is stopping", addr)
	case err != nil:
		l.opts.Logf("gatebridge: serve: %s: disconnected: %v", addr, err)
	default:
		l.opts.Logf("gatebridge: serve: %s: disconnected", addr)
	}
}

// authenticate does the TLS handshake, if any, and reads and checks the
// first line. It returns that line and what the client sent behind it,
// to replay; or an error and the request id to answer.
func (l *listener) authenticate(ctx context.Context, nc net.Conn) ([]byte, json.RawMessage, error) {
	if tc, ok := nc.(*tls.Conn); ok {
		if err := tc.HandshakeContext(ctx); err != nil {
			if errors.Is(err, io.EOF) { // connected, sent nothing, closed
				return nil, nil, errNothingSent
			}
			return nil, nil, fmt.Errorf("TLS handshake: %w", err)
		}
	}
	// A connection takes a buffer of MaxHandshakeBytes only once its
	// first bytes have come: idle connections hold a small one.
	small := make([]byte, 512)
	n, err := 0, error(nil)
	for n == 0 && err == nil {
		n, err = nc.Read(small)
	}
	if n == 0 {
		if errors.Is(err, io.EOF) {
			return nil, nil, errNothingSent
		}
		return nil, nil, err
	}
	br := l.readers.Get().(*bufio.Reader)
	br.Reset(io.MultiReader(bytes.NewReader(small[:n]), nc))
	defer func() {
		br.Reset(nil)
		l.readers.Put(br)
	}()
	line, id, err := l.handshake(br)
	if err != nil {
		return nil, id, err
	}
	// The line and what came behind it, out of the pooled buffer.
	rest, _ := br.Peek(br.Buffered())
	return append(bytes.Clone(line), rest...), id, nil
}

// errNothingSent is the handshake's error for a client that closed the
// connection without sending a byte.
var errNothingSent = errors.New("closed before sending anything")

// handshake reads the first line and checks it; it returns the line (with
// its newline, in br's buffer), or an error and the request id to answer.
func (l *listener) handshake(br *bufio.Reader) ([]byte, json.RawMessage, error) {
	line, err := br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil, nil, fmt.Errorf("the first line is over %d bytes: it must be the initialize request", l.opts.MaxHandshakeBytes)
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			if len(line) == 0 {
				return nil, nil, errNothingSent
			}
			return nil, nil, errors.New("the client closed the connection before the end of its first line")
		}
		return nil, nil, err
	}
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  struct {
			AuthToken *string `json:"authToken"`
		} `json:"params"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, nil, errors.New("the first line is not a JSON-RPC request: it must be the initialize request")
	}
	id := m.ID
	if !validID(id) { // also a missing id
		id = nil
	}
	switch {
	case m.JSONRPC != "2.0" || m.Method != MethodInitialize || id == nil:
		return nil, id, errors.New("the first message must be the initialize request (with an id)")
	case m.Params.AuthToken == nil || *m.Params.AuthToken == "":
		return nil, id, errors.New("initialize carries no authToken")
	}
	got := sha256.Sum256([]byte(*m.Params.AuthToken))
	if subtle.ConstantTimeCompare(got[:], l.want[:]) != 1 {
		return nil, id, errors.New("wrong authToken")
	}
	return line, id, nil
}

// refuse tells a client why it is closed, when fewer than MaxPending are
// being told already; else the caller just closes it.
func (l *listener) refuse(nc net.Conn, id json.RawMessage, e *Error) {
	select {
	case l.refusing <- struct{}{}:
		defer func() { <-l.refusing }()
		refuse(nc, id, e)
	default:
	}
}

// refuse writes one error response (id nil: null) and ends the sending
// side, then reads and drops what the client still sends, for a bounded
// time and number of bytes, before the caller closes the connection:
// closing with unread bytes would reset the connection, and the client
// could lose the error before reading it.
func refuse(nc net.Conn, id json.RawMessage, e *Error) {
	if id == nil {
		id = json.RawMessage("null")
	}
	nc.SetDeadline(time.Now().Add(closeTimeout))
	b, err := json.Marshal(&Message{JSONRPC: "2.0", ID: id, Error: e})
	if err != nil {
		return
	}
	if _, err := nc.Write(append(b, '\n')); err != nil {
		return
	}
	if cw, ok := nc.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	io.CopyN(io.Discard, nc, refuseDrainBytes)
}

// How refusals are logged: at most logBurst lines per logWindow, then a
// line counting those not logged (and the connections closed before
// sending anything) when the window ends.
const logBurst = 20

var logWindow = time.Minute

// logLimit writes the refusals' log lines, rate limited.
type logLimit struct {
	logf   func(format string, args ...any)
	burst  int
	window time.Duration

	mu      sync.Mutex
	timer   *time.Timer // while a window is open
	lines   int         // refusals logged in this window
	dropped int         // refusals not logged in this window
	silent  int         // connections closed before sending anything
	last    string      // the address of the last of them
	stopped bool
}

// refused logs that the connection from addr was refused, and why.
func (g *logLimit) refused(addr, format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open()
	if g.lines >= g.burst {
		g.dropped++
		return
	}
	g.lines++
	g.logf("gatebridge: serve: %s: refused: "+format, append([]any{addr}, args...)...)
}

// silentConn counts a connection closed before sending anything.
func (g *logLimit) silentConn(addr string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open()
	g.silent++
	g.last = addr
}

// open starts a window if none is open (under mu).
func (g *logLimit) open() {
	if g.timer == nil && !g.stopped {
		g.timer = time.AfterFunc(g.window, g.flush)
	}
}

// flush ends the window: it logs what was counted.
func (g *logLimit) flush() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return
	}
	g.summary()
}

// summary logs what was counted in the window and closes it (under mu).
func (g *logLimit) summary() {
	if g.dropped > 0 {
		g.logf("gatebridge: serve: %d more connections refused in the last %v, not logged (at most %d lines per %v)", g.dropped, g.window, g.burst, g.window)
	}
	if g.silent > 0 {
		g.logf("gatebridge: serve: %d connections closed before sending anything in the last %v (the last from %s)", g.silent, g.window, g.last)
	}
	if g.timer != nil {
		g.timer.Stop()
	}
	g.timer, g.lines, g.dropped, g.silent, g.last = nil, 0, 0, 0, ""
}

// stop logs what is counted; nothing is logged after it returns.
func (g *logLimit) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.summary()
	g.stopped = true
}
