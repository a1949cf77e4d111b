package rpc

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
)

// ListenAndServe listens on TCP addr, with TLS when tlsConfig is set, and
// serves each connection with serve (ServeListener) until ctx is done.
// It logs where it listens, and warns when the address is not loopback
// and there is no TLS; name is the command, for the messages.
func ListenAndServe(ctx context.Context, name, addr string, tlsConfig *tls.Config, opts ListenOptions, serve ServeFunc) error {
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: listen on %s: %w", name, addr, err)
	}
	how := "plain TCP"
	if tlsConfig != nil {
		ln, how = tls.NewListener(ln, tlsConfig), "TLS"
	}
	logf("gatebridge: %s: listening on %s (%s)", name, ln.Addr(), how)
	if host, _, _ := net.SplitHostPort(addr); tlsConfig == nil && !IsLoopbackHost(host) {
		logf("gatebridge: warning: %s: %s is not a loopback address and there is no TLS: the token and everything else travel in clear text (fine inside a pod's own network namespace; else pass --tls-cert and --tls-key)", name, addr)
	}
	if err := ServeListener(ctx, ln, opts, serve); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	logf("gatebridge: %s: stopped listening on %s", name, ln.Addr())
	return nil
}

// IsLoopbackHost reports whether host (of host:port) can be reached only
// from this machine: localhost or a loopback address. "" (every
// interface) is not.
func IsLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// EndOnDone returns a reader of r that reads end of file once ctx is done,
// even while a Read of r blocks: a Read of stdin cannot be interrupted,
// and the connection ends only when its reader does, so without this a
// caught SIGTERM would wait for the client to close stdin. The goroutine
// copying r ends when r does, or at its first read after ctx is done (in
// gatebridge serve, the process exits first).
func EndOnDone(ctx context.Context, r io.Reader) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		_, err := io.Copy(pw, r)
		pw.CloseWithError(err) // nil: end of file
	}()
	context.AfterFunc(ctx, func() { pw.CloseWithError(io.EOF) })
	return pr
}
