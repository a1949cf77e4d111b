package mcpserver

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/bridge/mcpserver/mcphttptest"
)

// lockedBuffer is a strings.Builder safe for concurrent use.
type lockedBuffer = mcphttptest.LockedBuffer

// testToken is the tests' bearer token.
const testToken = "s3cret-token-7d1e4b2a9c0f5e38d6a1"

// startHTTP runs ServeHTTP on 127.0.0.1:0 with token; it waits until it
// serves or returns. It is stopped at cleanup.
func startHTTP(t *testing.T, token string) *mcphttptest.Server {
	t.Helper()
	srv := testServer(t, Options{})
	return mcphttptest.Start(t, func(ctx context.Context, stderr *lockedBuffer) error {
		return srv.ServeHTTP(ctx, HTTPOptions{Addr: "127.0.0.1:0", Token: token}, stderr)
	})
}

var connectHTTP = mcphttptest.Connect

// The review's attack: `mcp --http` without a token served anyone on
// this machine, who ran commands through it as the invoker. ServeHTTP
// refuses to serve without a token (whatever its caller checked), and a
// request without it, or with a wrong one, gets a 401 and no session,
// on loopback too.
func TestHTTPNeedsToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if s := startHTTP(t, ""); s.URL != "" || !errors.Is(s.Err, ErrNoToken) {
		t.Fatalf("without a token: served at %q (%v)", s.URL, s.Err)
	}
	s := startHTTP(t, testToken)
	if s.URL == "" {
		t.Fatalf("with a token: %v %s", s.Err, s.Stderr.String())
	}
	for _, auth := range []string{"", "Bearer wrong-token", "Bearer " + testToken + "-and-more", "Bearer " + testToken[:len(testToken)-1], testToken, "Basic " + testToken} {
		req, _ := http.NewRequest("POST", s.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("Authorization %q on loopback: %s", auth, resp.Status)
		}
		if cs, err := connectHTTP(ctx, s.URL, auth); err == nil {
			res, _ := bash(t, cs, map[string]any{"command": "id -u"})
			cs.Close()
			t.Fatalf("Authorization %q: a session, and `id -u` ran: %q", auth, text(res))
		}
	}
	cs, err := connectHTTP(ctx, s.URL, "Bearer "+testToken)
	if err != nil {
		t.Fatalf("with the token: %v", err)
	}
	defer cs.Close()
	if res, out := bash(t, cs, map[string]any{"command": "echo over http"}); res.IsError || out.Stdout != "over http\n" {
		t.Fatalf("with the token: %q", text(res))
	}
}

// A local user without the token held `mcp --http`'s connections as long
// as it liked: after a 401 the server kept the connection for the next
// request with no idle timeout; a request announcing a body it never sent
// held its connection in the drain of that body, forever; and connections
// that sent nothing were each held for ReadHeaderTimeout with no bound on
// how many, so a few thousand renewed every 10 s took every file
// descriptor of the server (20,000 here) and the token holder could not
// connect. Now a 401 closes its connection at once, without waiting for
// a body, and connections that have not shown the token are bounded as
// serve --listen's are (a new one closes the oldest idle one): the token
// holder gets in while the flood goes on.
func TestMCPHTTPUnauthenticatedConnsBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := startHTTP(t, testToken)
	if s.URL == "" {
		t.Fatalf("did not serve: %v %s", s.Err, s.Stderr.String())
	}
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	dial := func() net.Conn {
		t.Helper()
		nc, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		return nc
	}
	// closedWithin reports whether the server closes nc within d (what it
	// sends before is read and dropped).
	closedWithin := func(nc net.Conn, d time.Duration) (bool, error) {
		nc.SetReadDeadline(time.Now().Add(d))
		_, err := io.Copy(io.Discard, nc)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return false, err
		}
		return true, nil
	}

	t.Run("keep-alive after 401", func(t *testing.T) {
		for i := range 5 {
			nc := dial()
			if _, err := io.WriteString(nc, "GET / HTTP/1.1\r\nHost: "+u.Host+"\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(nc).ReadString('\n')
			if err != nil || !strings.Contains(line, "401") {
				t.Fatalf("connection %d: %q, %v; want a 401", i, line, err)
			}
			if ok, err := closedWithin(nc, 3*time.Second); !ok {
				t.Fatalf("connection %d: still open 3s after its 401 (%v): a client without the token holds it", i, err)
			}
		}
	})

	t.Run("body never sent", func(t *testing.T) {
		for i := range 5 {
			nc := dial()
			if _, err := io.WriteString(nc, "POST / HTTP/1.1\r\nHost: "+u.Host+"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"); err != nil {
				t.Fatal(err)
			}
			if ok, err := closedWithin(nc, 3*time.Second); !ok {
				t.Fatalf("connection %d: still open 3s after its headers, without the token (%v)", i, err)
			}
		}
	})

	t.Run("silent flood", func(t *testing.T) {
		const flood = 150
		var conns []net.Conn
		for range flood {
			conns = append(conns, dial())
		}
		time.Sleep(300 * time.Millisecond)
		// The token holder gets in (and runs a command) while the flood
		// is renewed.
		stop := make(chan struct{})
		renewed := make(chan []net.Conn)
		go func() {
			var more []net.Conn
			defer func() { renewed <- more }()
			for {
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
				nc, err := net.Dial("tcp", u.Host)
				if err != nil {
					return
				}
				more = append(more, nc)
			}
		}()
		cs, err := connectHTTP(ctx, s.URL, "Bearer "+testToken)
		if err == nil {
			res, out := bash(t, cs, map[string]any{"command": "echo in"})
			if res.IsError || out.Stdout != "in\n" {
				err = errors.New(text(res))
			}
			cs.Close()
		}
		close(stop)
		more := <-renewed
		defer func() {
			for _, nc := range more {
				nc.Close()
			}
		}()
		if err != nil {
			t.Fatalf("the token holder, during a flood of silent connections: %v", err)
		}
		open := 0
		for _, nc := range append(conns, more...) {
			if ok, _ := closedWithin(nc, 20*time.Millisecond); !ok {
				open++
			}
		}
		t.Logf("%d of %d silent connections still open", open, flood+len(more))
		if open > 40 {
			t.Errorf("%d of %d connections that never sent a byte are still open: they are not bounded", open, flood+len(more))
		}
	})
}
