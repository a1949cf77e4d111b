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
)

// Defaults of ListenOptions fields left zero.
const (
	DefaultMaxConns          = 16
	DefaultHandshakeTimeout  = 10 * time.Second
	DefaultMaxHandshakeBytes = 64 << 10
)

// closeTimeout bounds writing the one error line to a client that is
// refused, and what is left to write to a connection when the server
// stops.
const closeTimeout = 2 * time.Second

// refuseDrainBytes bounds what is read and dropped from a refused client.
const refuseDrainBytes = 256 << 10

// ListenOptions configure [ServeListener].
type ListenOptions struct {
	// Token is what initialize's authToken must be; it may not be empty.
	Token string
	// MaxConns caps the connections open at once, those still in their
	// handshake included; one more is refused with -32003 and closed.
	MaxConns int
	// HandshakeTimeout is how long a client has, from the moment it is
	// accepted, to send its first line (and, over TLS, to finish the TLS
	// handshake). It is not reset by the bytes that arrive.
	HandshakeTimeout time.Duration
	// MaxHandshakeBytes caps the first line, newline included.
	MaxHandshakeBytes int
	// Logf receives a line per connection accepted, refused and ended,
	// naming the remote address (never the token); nil discards them.
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
// A client that closes its end ends only its own connection.
func ServeListener(ctx context.Context, ln net.Listener, opts ListenOptions, serve ServeFunc) error {
	if opts.Token == "" {
		return errors.New("rpc: ServeListener needs a token")
	}
	setDefault(&opts.MaxConns, DefaultMaxConns)
	setDefault(&opts.HandshakeTimeout, DefaultHandshakeTimeout)
	setDefault(&opts.MaxHandshakeBytes, DefaultMaxHandshakeBytes)
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	l := &listener{opts: opts, serve: serve, want: sha256.Sum256([]byte(opts.Token)),
		slots: make(chan struct{}, opts.MaxConns), refusing: make(chan struct{}, opts.MaxConns)}
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel() // stops every connection
		ln.Close()
		l.conns.Wait()
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
		select {
		case l.slots <- struct{}{}:
			l.conns.Add(1)
			go func() {
				defer l.conns.Done()
				defer func() { <-l.slots }()
				l.handle(ctx, nc)
			}()
		default:
			l.refuseBusy(nc)
		}
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
	slots    chan struct{} // one per open connection
	refusing chan struct{} // one per connection being told the server is full
	conns    sync.WaitGroup
}

// handle authenticates one connection, then serves it.
func (l *listener) handle(ctx context.Context, nc net.Conn) {
	addr := nc.RemoteAddr().String()
	defer nc.Close()
	// The handshake's deadline is absolute: a client that trickles bytes
	// is cut off as surely as a silent one. A cancelled ctx ends it too.
	nc.SetDeadline(time.Now().Add(l.opts.HandshakeTimeout))
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Now()) })
	defer stop()
	if tc, ok := nc.(*tls.Conn); ok {
		if err := tc.HandshakeContext(ctx); err != nil {
			if !errors.Is(err, io.EOF) { // else a probe: connected, sent nothing, closed
				l.opts.Logf("gatebridge: serve: %s: refused: TLS handshake: %v", addr, err)
			}
			return
		}
	}
	br := bufio.NewReaderSize(nc, l.opts.MaxHandshakeBytes)
	first, id, err := l.handshake(br)
	if errors.Is(err, errNothingSent) {
		return // a probe (a TCP readiness check, a port scan): not worth a log line
	}
	if err != nil {
		var ne net.Error
		if ctx.Err() != nil {
			err = errors.New("the server is stopping")
		} else if errors.As(err, &ne) && ne.Timeout() {
			err = fmt.Errorf("no initialize request within %v", l.opts.HandshakeTimeout)
		}
		l.opts.Logf("gatebridge: serve: %s: refused: %v", addr, err)
		refuse(nc, id, &Error{Code: CodeUnauthorized, Message: "unauthorized: " + err.Error(),
			Data: map[string]string{"hint": "send initialize, with the server's token in params.authToken, as the first line"}})
		return
	}
	nc.SetDeadline(time.Time{})
	stop()
	// From here the connection is the client's: a cancelled ctx stops
	// reading (serve then stops and removes what the connection started
	// and returns), and bounds the writing of what is left to say.
	stop = context.AfterFunc(ctx, func() {
		nc.SetReadDeadline(time.Now())
		nc.SetWriteDeadline(time.Now().Add(closeTimeout))
	})
	defer stop()
	l.opts.Logf("gatebridge: serve: %s: connected", addr)
	err = l.serve(ctx, io.MultiReader(bytes.NewReader(first), br), nc)
	switch {
	case ctx.Err() != nil:
		l.opts.Logf("gatebridge: serve: %s: closed: the server is stopping", addr)
	case err != nil:
		l.opts.Logf("gatebridge: serve: %s: disconnected: %v", addr, err)
	default:
		l.opts.Logf("gatebridge: serve: %s: disconnected", addr)
	}
}

// errNothingSent is the handshake's error for a client that closed the
// connection without sending a byte.
var errNothingSent = errors.New("closed before sending anything")

// handshake reads the first line and checks it; it returns the line (with
// its newline) to replay, or an error and the request id to answer.
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
	return bytes.Clone(line), id, nil
}

// refuseBusy tells a client over the connection cap so, and closes it, on
// a goroutine of its own (a TLS handshake takes a round trip); when as
// many are being refused already, it just closes it.
func (l *listener) refuseBusy(nc net.Conn) {
	select {
	case l.refusing <- struct{}{}:
	default:
		nc.Close()
		return
	}
	addr := nc.RemoteAddr().String()
	l.opts.Logf("gatebridge: serve: %s: refused: %d connections are open (the limit)", addr, l.opts.MaxConns)
	l.conns.Add(1)
	go func() {
		defer l.conns.Done()
		defer func() { <-l.refusing }()
		defer nc.Close()
		refuse(nc, nil, &Error{Code: CodeLimit,
			Message: fmt.Sprintf("too many connections: %d are open, the server's limit", l.opts.MaxConns),
			Data:    map[string]string{"hint": "close a connection or try again later; the server's limit is serve --max-connections"}})
	}()
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
