package httpgate

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/gates/secrets"
)

// testServer is an HTTP server on 127.0.0.1 that records every request
// it gets: /echo answers with the method, path, headers and body;
// /reflect quotes the request's headers back, gzipped or a range of them
// when asked; /redirect?to=URL&code=N redirects; /status?code=N answers N; /big?n=N
// sends N bytes; /slow sends a line, then waits for release (or 5s).
type testServer struct {
	*httptest.Server
	mu      sync.Mutex
	paths   []string
	release chan struct{}
}

func newTestServer(t *testing.T, tlsServer bool) *testServer {
	t.Helper()
	ts := &testServer{release: make(chan struct{})}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		ts.paths = append(ts.paths, r.URL.EscapedPath())
		ts.mu.Unlock()
		q := r.URL.Query()
		switch {
		case r.URL.Path == "/redirect":
			code, _ := strconv.Atoi(q.Get("code"))
			if code == 0 {
				code = 302
			}
			w.Header().Set("Location", q.Get("to"))
			w.WriteHeader(code)
			io.WriteString(w, "moved\n")
		case r.URL.Path == "/status":
			code, _ := strconv.Atoi(q.Get("code"))
			w.WriteHeader(code)
			io.WriteString(w, "status body\n")
		case r.URL.Path == "/big":
			n, _ := strconv.Atoi(q.Get("n"))
			w.Write(bytes.Repeat([]byte("x"), n))
		case r.URL.Path == "/reflect":
			// As a server that quotes the request back (an error page,
			// a debugging endpoint) and speaks HTTP well: gzip when
			// asked, ranges when asked.
			var b strings.Builder
			for n, v := range r.Header {
				fmt.Fprintf(&b, "%s: %s\n", n, strings.Join(v, ", "))
			}
			if r.Header.Get("Range") == "" && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
				w.Header().Set("Content-Encoding", "gzip")
				zw := gzip.NewWriter(w)
				io.WriteString(zw, b.String())
				zw.Close()
				return
			}
			http.ServeContent(w, r, "", time.Time{}, strings.NewReader(b.String()))
		case r.URL.Path == "/slow":
			io.WriteString(w, "first\n")
			w.(http.Flusher).Flush()
			select {
			case <-ts.release:
			case <-time.After(5 * time.Second):
			case <-r.Context().Done():
			}
			io.WriteString(w, "second\n")
		default:
			body, _ := io.ReadAll(r.Body)
			var names []string
			for n := range r.Header {
				names = append(names, n)
			}
			sort.Strings(names)
			fmt.Fprintf(w, "%s %s\n", r.Method, r.URL.RequestURI())
			for _, n := range names {
				fmt.Fprintf(w, "%s: %s\n", n, strings.Join(r.Header[n], ", "))
			}
			fmt.Fprintf(w, "\n%s", body)
		}
	})
	if tlsServer {
		ts.Server = httptest.NewTLSServer(h)
	} else {
		ts.Server = httptest.NewServer(h)
	}
	t.Cleanup(func() {
		select {
		case <-ts.release:
		default:
			close(ts.release)
		}
		ts.Close()
	})
	return ts
}

// hits returns the paths requested so far.
func (ts *testServer) hits() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]string(nil), ts.paths...)
}

// port is the server's port.
func (ts *testServer) port() string {
	return ts.URL[strings.LastIndexByte(ts.URL, ':')+1:]
}

// newGate makes a gate of c (name http), failing the test on error.
func newGate(t *testing.T, c Config, env gates.Env) *Gate {
	t.Helper()
	g, err := New(context.Background(), c, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// fakeLookup maps host names to addresses (and counts lookups).
type fakeLookup struct {
	mu    sync.Mutex
	addrs map[string][]netip.Addr
	n     int
}

func (f *fakeLookup) lookup(_ context.Context, host string) ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	a, ok := f.addrs[host]
	if !ok {
		return nil, fmt.Errorf("no such host %s", host)
	}
	return a, nil
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// result is one call as the sandbox sees it.
type result struct {
	code           int
	stdout, stderr string
	events         []event
}

// call runs g with args (and stdin) as the dispatcher would, the error
// printed on stderr as "gatebridge: http: MSG".
func call(t *testing.T, g *Gate, stdin []byte, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	var r result
	var mu sync.Mutex
	c := &gates.Call{Args: args, Stdin: stdin, Stdout: &out, Stderr: &errb, Audit: func(e any) {
		b, _ := json.Marshal(e)
		var ev event
		json.Unmarshal(b, &ev)
		mu.Lock()
		r.events = append(r.events, ev)
		mu.Unlock()
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code, err := g.Call(ctx, c)
	if err != nil {
		fmt.Fprintf(&errb, "gatebridge: http: %v\n", err)
	}
	r.code, r.stdout, r.stderr = gates.ExitCodeOf(code, err), out.String(), errb.String()
	return r
}

// testStore is a secrets store with gh (from the environment).
func testStore(t *testing.T, value string) *secrets.Store {
	t.Helper()
	t.Setenv("GB_TEST_HTTP_TOKEN", value)
	st, err := secrets.New(map[string]secrets.Source{"gh": {Env: "GB_TEST_HTTP_TOKEN"}}, secrets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.ScrubEnv()
	return st
}
