package mcpserver

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatebridge/gatebridge/internal/connpool"
)

// HTTPOptions configure `gatebridge mcp --http`.
type HTTPOptions struct {
	Addr string // host:port
	// Token is the bearer token every request must show (required, on
	// loopback too: anyone who reaches the port would run commands as
	// the invoker). The caller reads and checks it (its length, its
	// file's mode).
	Token        string
	MaxSandboxes int           // sandboxes open at once (mcp.sessions.max_sandboxes); 0: DefaultMaxSandboxes
	IdleTimeout  time.Duration // a sandbox with no call for this long is closed (mcp.sessions.idle_timeout); 0: DefaultIdleTimeout
}

// ErrNoToken refuses to serve HTTP without a token.
var ErrNoToken = errors.New("mcp: streamable HTTP needs a token: anyone who reaches the port could run commands as you")

// Timeouts of mcp --http's connections: to send a request's headers, and
// to send the next request on a connection kept alive.
const (
	headerTimeout   = 10 * time.Second
	idleConnTimeout = 2 * time.Minute
)

// ServeHTTP serves streamable HTTP on ho.Addr until ctx ends: each MCP
// session gets its own host (its sandbox) at its first tool call, at most
// MaxSandboxes at once, closed when the session ends, after IdleTimeout
// without a call, or when the server stops. Every request needs the
// bearer token, on loopback too. Log lines go to stderr; the caller
// warns about an address that is not loopback.
func (s *Server) ServeHTTP(ctx context.Context, ho HTTPOptions, stderr io.Writer) error {
	if ho.Token == "" {
		return ErrNoToken
	}
	// One probe host at start: a backend that cannot run fails now, and
	// its gates describe the tool. Each session then gets its own host at
	// its first call (the SDK may ask for a server for any request, so
	// nothing costly is made there), closed when the session ends.
	probe, err := s.newHost(ctx, nil)
	if err != nil {
		return err
	}
	description := probe.description
	probe.close()
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, "gatebridge: mcp: "+format+"\n", args...) }
	pool := newSandboxes(ctx, func(ctx context.Context) (*host, error) { return s.newHost(ctx, nil) },
		ho.MaxSandboxes, ho.IdleTimeout, logf)
	defer pool.close()
	server := s.newMCPServer(description, nil, pool.resolve)
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{SessionTimeout: time.Hour})
	ln, err := net.Listen("tcp", ho.Addr)
	if err != nil {
		return fmt.Errorf("mcp: listen on %s: %w", ho.Addr, err)
	}
	logf("serving streamable HTTP on http://%s/", ln.Addr())
	// Until a connection has shown the token it is bounded as serve
	// --listen's are (a pool of pending connections, where a new one
	// closes the oldest idle one), it has ReadHeaderTimeout to send its
	// first request, and a 401 closes it: a local user cannot hold
	// connections (the server's file descriptors) without the token.
	hs := &http.Server{Handler: bearer(ho.Token, handler),
		ReadHeaderTimeout: headerTimeout, IdleTimeout: idleConnTimeout,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, authConnKey{}, c)
		}}
	ln = &authListener{Listener: ln, pending: connpool.New(0, 0)}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// bearer lets through only requests with Authorization: Bearer token.
// The first one takes its connection out of the pending pool
// (authListener); any other gets a 401 and its connection is closed
// without reading the body it announced (a client that never sends it
// would hold the connection in the server's drain of it).
func bearer(token string, next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token == "" || subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			http.NewResponseController(w).SetReadDeadline(time.Now())
			w.Header().Set("Connection", "close")
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "unauthorized: send Authorization: Bearer TOKEN", http.StatusUnauthorized)
			return
		}
		if c, ok := r.Context().Value(authConnKey{}).(*authConn); ok {
			c.leavePool()
		}
		next.ServeHTTP(w, r)
	})
}

// authConnKey is the request context's key for its *authConn.
type authConnKey struct{}

// authListener puts each connection in a pool of pending connections
// (internal/connpool) until a request on it shows the token.
type authListener struct {
	net.Listener
	pending *connpool.Pool
}

func (l *authListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	c := &authConn{Conn: nc, pool: l.pending}
	c.p = connpool.NewConn(nc, func() { nc.Close() })
	l.pending.Add(c.p)
	return c, nil
}

// authConn is a connection of authListener.
type authConn struct {
	net.Conn
	pool *connpool.Pool
	p    *connpool.Conn
	once sync.Once
}

// leavePool takes c out of the pending pool (authenticated, or closed).
func (c *authConn) leavePool() { c.once.Do(func() { c.pool.Remove(c.p) }) }

func (c *authConn) Close() error {
	c.leavePool()
	return c.Conn.Close()
}
