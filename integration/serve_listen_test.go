package integration

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/bridge/rpc/rpctest"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

// listenServer is `gatebridge serve --listen 127.0.0.1:0 --token-file F`.
type listenServer struct {
	t      *testing.T
	cmd    *exec.Cmd
	addr   string // where it listens
	token  string
	dir    string // its cwd, holding the token file
	stderr *lockedWriter
	tls    *tls.Config // a client's, when it serves TLS
}

const listenToken = "c0ffee-7d1e-4b2a-9c0f-5e38d6a1-token"

// startServeListen starts the server with args after the token file, and
// waits until it listens; it is stopped (SIGTERM) at cleanup.
func startServeListen(t *testing.T, listen string, args ...string) *listenServer {
	t.Helper()
	return startServeListenEnv(t, nil, listen, args...)
}

// allowLocal lets a --listen server offer the local backend, which it
// refuses by default (a leaked token would be a shell on the host).
var allowLocal = []string{"GATEBRIDGE_SANDBOX_ALLOW_UNSANDBOXED=true"}

func startServeListenEnv(t *testing.T, env []string, listen string, args ...string) *listenServer {
	t.Helper()
	s := &listenServer{t: t, token: listenToken, dir: workspace(t), stderr: &lockedWriter{b: &strings.Builder{}}}
	tokenFile := filepath.Join(s.dir, "token")
	must(t, os.WriteFile(tokenFile, []byte(s.token+"\n"), 0o600))
	s.cmd = exec.Command(binary, append([]string{"serve", "--listen", listen, "--token-file", tokenFile}, args...)...)
	s.cmd.Dir = s.dir
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.Stderr = s.stderr
	must(t, s.cmd.Start())
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("serve stderr:\n%s", s.stderr)
		}
	})
	re := regexp.MustCompile(`gatebridge: serve: listening on (\S+) `)
	if !sandboxtest.Poll(20*time.Second, func() bool { return re.MatchString(s.stderr.String()) }) {
		t.Fatalf("the server does not listen: %s", s.stderr)
	}
	s.addr = re.FindStringSubmatch(s.stderr.String())[1]
	return s
}

// stop sends SIGTERM and waits for the server to exit; it returns its
// exit error.
func (s *listenServer) stop() error {
	if s.cmd.ProcessState != nil {
		return nil
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(60 * time.Second):
		s.cmd.Process.Kill()
		s.t.Errorf("serve did not exit within 60s of SIGTERM")
		return <-done
	}
}

// dial opens a connection (TLS when the server serves it), closed at
// cleanup.
func (s *listenServer) dial() net.Conn {
	s.t.Helper()
	var nc net.Conn
	var err error
	if s.tls != nil {
		nc, err = tls.Dial("tcp", s.addr, s.tls)
	} else {
		nc, err = net.Dial("tcp", s.addr)
	}
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { nc.Close() })
	return nc
}

// client dials and initializes with the token.
func (s *listenServer) client() (*rpctest.Client, net.Conn) {
	s.t.Helper()
	nc := s.dial()
	c := rpctest.New(s.t, nc, nc)
	c.Call(rpc.MethodInitialize, rpc.InitializeParams{ClientName: "integration", ProtocolVersion: rpc.ProtocolVersion, AuthToken: s.token}, nil)
	c.Notify(rpc.MethodInitialized, struct{}{})
	return c, nc
}

// TestServeListen: clients over TCP, on every backend. Each connection has
// its own sandboxes, removed when it closes while the others go on; SIGTERM
// stops the server and removes what the remaining ones started. The log
// names each client's address and never the token.
func TestServeListen(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		var env []string
		if backend == "local" {
			env = allowLocal
		}
		s := startServeListenEnv(t, env, "127.0.0.1:0")
		a, aConn := s.client()
		b, _ := s.client()

		wsA, wsB := workspace(t), workspace(t)
		a.Call(rpc.MethodGateRegister, rpc.GateRegisterParams{Name: "ask_runtime"}, nil)
		a.Call(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "sb", Backend: backend, Workspace: wsA}, nil)
		o := a.Run("sb", "p1", func(p rpc.GateCallParams) rpc.GateCallResult {
			return rpc.GateCallResult{Stdout: []byte("runtime says " + strings.Join(p.Args, ",") + "\n")}
		}, "sh", "-c", "echo over tcp; ask_runtime x y; gb_echo gate")
		if o.Exited.ExitCode != 0 || string(o.Stdout) != "over tcp\nruntime says x,y\ngate\n" {
			t.Fatalf("exit %d stdout %q stderr %q", o.Exited.ExitCode, o.Stdout, o.Stderr)
		}
		b.Call(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "sb", Backend: backend, Workspace: wsB}, nil)
		// The other connection does not see a's gate.
		if o := b.Run("sb", "p1", nil, "sh", "-c", "ask_runtime"); o.Exited.ExitCode != 127 {
			t.Fatalf("b called a's gate: exit %d stdout %q stderr %q", o.Exited.ExitCode, o.Stdout, o.Stderr)
		}
		markA, markB := "4242"+fmtNano(), "4343"+fmtNano()
		a.Call(rpc.MethodProcessStart, rpc.ProcessStartParams{ProcessID: "long", SandboxID: "sb", Argv: []string{"sleep", markA}}, nil)
		b.Call(rpc.MethodProcessStart, rpc.ProcessStartParams{ProcessID: "long", SandboxID: "sb", Argv: []string{"sleep", markB}}, nil)
		running := func(mark, ws string) bool {
			if backend == "docker" {
				return ownedContainers(t, ws) > 0
			}
			return len(sleepPids(mark)) > 0
		}
		if !sandboxtest.Poll(30*time.Second, func() bool { return running(markA, wsA) && running(markB, wsB) }) {
			t.Fatal("the clients' processes are not running")
		}

		aConn.Close()
		if !sandboxtest.Poll(60*time.Second, func() bool { return !running(markA, wsA) }) {
			t.Fatal("a disconnected; its sandbox is still there")
		}
		if !running(markB, wsB) {
			t.Fatal("b's sandbox went away with a")
		}
		// a's connection is logged as ended once its Serve has returned,
		// which can be after its processes are gone.
		if !sandboxtest.Poll(30*time.Second, func() bool { return strings.Contains(s.stderr.String(), ": disconnected") }) {
			t.Fatalf("a's connection is not logged as ended:\n%s", s.stderr)
		}
		var list rpc.ProcessListResult
		b.Call(rpc.MethodProcessList, struct{}{}, &list)

		if err := s.stop(); err != nil {
			t.Fatalf("serve exit after SIGTERM: %v", err)
		}
		if running(markB, wsB) {
			t.Fatal("b's sandbox outlived the server")
		}
		select {
		case <-b.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("b's connection is open after the server exited")
		}
		log := s.stderr.String()
		for _, want := range []string{": connected", ": disconnected", ": closed: the server is stopping", "stopped listening"} {
			if !strings.Contains(log, "gatebridge: serve: ") || !strings.Contains(log, want) {
				t.Errorf("the log lacks %q:\n%s", want, log)
			}
		}
		if strings.Contains(log, s.token) {
			t.Errorf("the log holds the token:\n%s", log)
		}
	})
}

func fmtNano() string { return strings.TrimLeft(time.Now().Format(".000000"), ".") }

// TestServeListenRefuses performs the attacks of a client without the
// token on the binary: each gets one -32006 error and a closed connection
// before any protocol state exists, with the defaults of serve (64 KiB,
// 5 s).
func TestServeListenRefuses(t *testing.T) {
	s := startServeListen(t, "127.0.0.1:0")
	// A silent client, connected first: it is dropped after 5 s, which
	// the other cases below use.
	silent := s.dial()
	silentSince := time.Now()
	trickle := s.dial()
	var trickled atomic.Int64
	go func() {
		for _, c := range []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"authToken":"` + s.token + `"}}`) {
			if _, err := trickle.Write([]byte{c}); err != nil {
				return
			}
			trickled.Add(1)
			time.Sleep(time.Second) // slower than 5 s for the line
		}
	}()

	for _, tc := range []struct{ name, line, want string }{
		{"wrong token", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientName":"x","protocolVersion":1,"authToken":"guess-7d1e"}}`, "wrong authToken"},
		{"no token", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientName":"x","protocolVersion":1}}`, "no authToken"},
		{"not initialize first", `{"jsonrpc":"2.0","id":1,"method":"sandbox/open","params":{"sandboxId":"x","backend":"local","workspace":"/"}}`, "must be the initialize request"},
		{"not JSON", `GET / HTTP/1.1`, "not a JSON-RPC request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := s.dial()
			io.WriteString(nc, tc.line+"\n")
			e := rpctest.Refused(t, nc, 10*time.Second).Error
			if e.Code != rpc.CodeUnauthorized || !strings.Contains(e.Message, tc.want) {
				t.Fatalf("%+v, want -32006 saying %q", e, tc.want)
			}
		})
	}

	t.Run("huge line", func(t *testing.T) {
		// 64 KiB without a newline, then nothing: refused at once.
		nc := s.dial()
		start := time.Now()
		_, err := nc.Write(bytes.Repeat([]byte("x"), 64<<10))
		must(t, err)
		if e := rpctest.Refused(t, nc, 5*time.Second).Error; e.Code != rpc.CodeUnauthorized || !strings.Contains(e.Message, "over 65536 bytes") {
			t.Fatalf("%+v", e)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("refused after %v", d)
		}
		// A client that streams a line of 64 MiB is cut off early: the
		// server never reads (nor holds) more than the bound, so the
		// writes fail once the socket buffers are full.
		nc = s.dial()
		nc.(*net.TCPConn).SetWriteBuffer(64 << 10)
		var sent int64
		wrote := make(chan error, 1)
		go func() {
			chunk := bytes.Repeat([]byte("y"), 64<<10)
			for sent < 64<<20 {
				nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
				n, err := nc.Write(chunk)
				atomic.AddInt64(&sent, int64(n))
				if err != nil {
					wrote <- err
					return
				}
			}
			wrote <- nil
		}()
		rpctest.Refused(t, nc, 10*time.Second)
		if err := <-wrote; err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the client wrote %d bytes (%v): the server read on", atomic.LoadInt64(&sent), err)
		}
		if n := atomic.LoadInt64(&sent); n > 16<<20 {
			t.Fatalf("the client wrote %d bytes before the server closed", n)
		}
	})

	t.Run("silent and trickling clients", func(t *testing.T) {
		for _, nc := range []net.Conn{silent, trickle} {
			e := rpctest.Refused(t, nc, time.Until(silentSince.Add(15*time.Second))).Error
			if e.Code != rpc.CodeUnauthorized || !strings.Contains(e.Message, "no initialize request within 5s") {
				t.Fatalf("%+v", e)
			}
		}
		if d := time.Since(silentSince); d < 4*time.Second {
			t.Fatalf("dropped after %v, want 5s", d)
		}
		if n := trickled.Load(); n < 2 || n > 10 {
			t.Fatalf("the trickling client sent %d bytes before it was dropped", n)
		}
	})

	// The log comes through a pipe: it may lag behind what the clients got.
	sandboxtest.Poll(5*time.Second, func() bool { return strings.Count(s.stderr.String(), ": refused: ") >= 8 })
	log := s.stderr.String()
	if strings.Count(log, ": refused: ") != 8 || strings.Contains(log, ": connected") {
		t.Errorf("log:\n%s", log)
	}
	if strings.Contains(log, s.token) || strings.Contains(log, "guess-7d1e") {
		t.Errorf("the log holds a token:\n%s", log)
	}
}

// --max-connections: one more token holder is refused with -32003, and a
// slot is free again once a client leaves. Connections without the token
// take no slot.
func TestServeListenMaxConnections(t *testing.T) {
	s := startServeListen(t, "127.0.0.1:0", "--max-connections", "2")
	s.dial()
	_, first := s.client()
	s.client()
	nc := s.dial()
	io.WriteString(nc, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientName":"x","protocolVersion":1,"authToken":"`+s.token+`"}}`+"\n")
	if e := rpctest.Refused(t, nc, 10*time.Second).Error; e.Code != rpc.CodeLimit || !strings.Contains(e.Message, "too many connections: 2") {
		t.Fatalf("%+v", e)
	}
	first.Close()
	if !sandboxtest.Poll(20*time.Second, func() bool {
		nc := s.dial()
		defer nc.Close()
		io.WriteString(nc, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientName":"x","protocolVersion":1,"authToken":"`+s.token+`"}}`+"\n")
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, _ := bufio.NewReader(nc).ReadBytes('\n')
		var m rpc.Message
		return json.Unmarshal(line, &m) == nil && m.Error == nil && m.Result != nil
	}) {
		t.Fatal("no connection is accepted after a client left")
	}
}

// TLS with a self-signed certificate: a client that trusts it runs a
// command; one that does not, one limited to TLS 1.1 and a plain-TCP one
// get nowhere.
func TestServeListenTLS(t *testing.T) {
	needBackend(t, "local")
	dir := workspace(t)
	certFile, keyFile, pool := selfSigned(t, dir)
	s := startServeListenEnv(t, allowLocal, "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.Contains(s.stderr.String(), "(TLS)") {
		t.Fatalf("stderr: %s", s.stderr)
	}
	s.tls = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	c, _ := s.client()
	c.Call(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "sb", Backend: "local", Workspace: workspace(t)}, nil)
	if o := c.Run("sb", "p", nil, "sh", "-c", "echo over tls; gb_echo gate"); string(o.Stdout) != "over tls\ngate\n" {
		t.Fatalf("exit %d stdout %q stderr %q", o.Exited.ExitCode, o.Stdout, o.Stderr)
	}
	if nc, err := tls.Dial("tcp", s.addr, &tls.Config{ServerName: "127.0.0.1"}); err == nil {
		nc.Close()
		t.Fatal("a client that does not trust the certificate connected")
	}
	if nc, err := tls.Dial("tcp", s.addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MaxVersion: tls.VersionTLS11}); err == nil {
		nc.Close()
		t.Fatal("a TLS 1.1 client connected")
	}
	nc, err := net.Dial("tcp", s.addr)
	must(t, err)
	defer nc.Close()
	io.WriteString(nc, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"authToken":"`+s.token+`"}}`+"\n")
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, _ := io.ReadAll(nc)
	if bytes.Contains(got, []byte(`"result"`)) {
		t.Fatalf("a plain-TCP client was answered: %q", got)
	}
	s.stop() // the whole log
	if strings.Contains(s.stderr.String(), "clear text") {
		t.Fatalf("a warning about clear text, with TLS: %s", s.stderr)
	}
}

// Without TLS off loopback, serve warns that the token travels in clear
// text (and serves: a pod's own network namespace is the intended use).
func TestServeListenClearTextWarning(t *testing.T) {
	s := startServeListen(t, "0.0.0.0:0")
	if !sandboxtest.Poll(5*time.Second, func() bool {
		return strings.Contains(s.stderr.String(), "gatebridge: warning: serve: 0.0.0.0:0 is not a loopback address and there is no TLS: the token and everything else travel in clear text")
	}) {
		t.Fatalf("no warning: %s", s.stderr)
	}
	_, port, _ := net.SplitHostPort(s.addr)
	s.addr = net.JoinHostPort("127.0.0.1", port)
	c, _ := s.client()
	c.Call(rpc.MethodProcessList, struct{}{}, nil)
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key
// (0600) into dir, and returns their paths and a pool that trusts it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "gatebridge test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	cert, err := x509.ParseCertificate(der)
	must(t, err)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	kb, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	must(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	must(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
	return certFile, keyFile, pool
}

// TestServeListenNoLocal: over the network the unsandboxed backend is not
// offered unless the config allows it: a leaked token must not be a shell
// on the sidecar's host.
func TestServeListenNoLocal(t *testing.T) {
	s := startServeListen(t, "127.0.0.1:0")
	c, _ := s.client()
	err := c.CallErr(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "sb", Backend: "local", Workspace: workspace(t)})
	if err == nil || err.Code != rpc.CodeInvalidParams || !strings.Contains(err.Message, "local") {
		t.Fatalf("sandbox/open local over --listen: %+v, want a refusal", err)
	}
}

// TestServeListenIdleFlood performs the attack of issue 26 on the binary:
// a local process (a pod's sandbox shares the sidecar's loopback) holds
// far more idle connections than every cap, without the token. They used
// to fill --max-connections; now the token holder still gets in and runs
// a command, the flood is closed to make room, and the log holds at most
// a burst of refusal lines.
func TestServeListenIdleFlood(t *testing.T) {
	needBackend(t, "local")
	s := startServeListenEnv(t, allowLocal, "127.0.0.1:0", "--max-connections", "2")
	for range 300 {
		s.dial()
	}
	for range 2 {
		c, _ := s.client()
		c.Call(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "sb", Backend: "local", Workspace: workspace(t)}, nil)
		if out := c.Run("sb", "p", nil, "echo", "in"); string(out.Stdout) != "in\n" {
			t.Fatalf("%+v", out)
		}
	}
	sandboxtest.Poll(5*time.Second, func() bool { return strings.Count(s.stderr.String(), ": refused: ") >= 20 })
	log := s.stderr.String()
	if n := strings.Count(log, ": refused: closed to make room"); n == 0 || n > 20 {
		t.Fatalf("%d eviction lines (want 1 to 20, the rest counted later); log:\n%s", n, log)
	}
}

// TestServeListenRefusesWorkspaceHoldingToken: a sandbox opened on a
// workspace that holds the server's token file, or on a directory above
// it, is refused: the sandboxed command would read the token (and could
// then connect to the server as a client). Before, it read it.
func TestServeListenRefusesWorkspaceHoldingToken(t *testing.T) {
	needBackend(t, "local")
	s := startServeListenEnv(t, allowLocal, "127.0.0.1:0")
	c, _ := s.client()
	for i, ws := range []string{s.dir, filepath.Dir(s.dir)} {
		id := fmt.Sprintf("sb%d", i)
		if err := c.CallErr(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: id, Backend: "local", Workspace: ws}); err != nil {
			if !strings.Contains(err.Message, "refusing workspace "+ws+": it holds "+filepath.Join(s.dir, "token")+" (--token-file)") {
				t.Fatalf("workspace %s: %+v", ws, err)
			}
			continue
		}
		out := c.Run(id, "p", nil, "sh", "-c", "cat token */token 2>/dev/null")
		t.Fatalf("workspace %s was opened; the sandbox read %q", ws, out.Stdout)
	}
	c.Call(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "ok", Backend: "local", Workspace: workspace(t)}, nil)
}
