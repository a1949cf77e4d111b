package httpgate

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/gates"
)

const token = "ghp_TestToken0123456789"

// localGate is a gate whose one rule allows GET and POST under the
// server's /echo, /redirect, /status, /big and /slow (allow_private: it is
// on 127.0.0.1), with an Authorization header from the secret gh.
func localGate(t *testing.T, ts *testServer, extra ...Rule) *Gate {
	t.Helper()
	rules := []Rule{{URL: ts.URL + "/", Methods: []string{"GET", "POST"}, AllowPrivate: true,
		Headers: map[string]string{"authorization": "Bearer ${secret:gh}"}}}
	return newGate(t, Config{Rules: append(rules, extra...)}, gates.Env{Secrets: testStore(t, token)})
}

// The rule's header reaches the server; the body streams to stdout,
// redacted (the server quotes the token back); the request is an audit
// event with the canonical URL, status, bytes received and rule index.
func TestGetWithInjectedHeader(t *testing.T) {
	ts := newTestServer(t, false)
	g := localGate(t, ts)
	r := call(t, g, nil, "-H", "X-Trace: 7", ts.URL+"/echo/./a?b=1")
	if r.code != 0 || !strings.Contains(r.stdout, "GET /echo/a?b=1\n") || !strings.Contains(r.stdout, "Authorization: Bearer [secret:gh]") ||
		!strings.Contains(r.stdout, "X-Trace: 7") || !strings.Contains(r.stdout, "User-Agent: gatebridge-http") {
		t.Fatalf("%+v", r)
	}
	if len(r.events) != 1 || r.events[0] != (event{Kind: "http_request", Method: "GET", URL: ts.URL + "/echo/a?b=1", Rule: 0, Status: 200, Bytes: int64(len(r.stdout) - len("[secret:gh]") + len(token))}) {
		t.Errorf("events %+v", r.events)
	}
	r = call(t, g, nil, "-i", ts.URL+"/status?code=404")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "HTTP/1.1 404 Not Found\r\n") || !strings.HasSuffix(r.stdout, "\r\n\r\nstatus body\n") {
		t.Errorf("-i: %+v", r)
	}
}

// Headers the sandbox may not send: one a rule sets (in any case), Host,
// hop-by-hop and Proxy-* ones, a value with CR/LF, a method override
// (a GET rule is not a DELETE rule). Nothing reaches the server.
func TestRefusedHeaders(t *testing.T) {
	ts := newTestServer(t, false)
	g := localGate(t, ts)
	for _, h := range []string{"Authorization: Bearer mine", "authorization: x", "Host: evil.example", "Connection: close",
		"Transfer-Encoding: chunked", "Proxy-Authorization: Basic x", "Content-Length: 5", "X-A: a\r\nAuthorization: x", "X-A: a\nb",
		"X-HTTP-Method-Override: DELETE", "x-http-method: DELETE", "X-Method-Override: PUT"} {
		r := call(t, g, nil, "-H", h, ts.URL+"/echo")
		if r.code != gates.ExitDenied || !strings.Contains(r.stderr, "gatebridge: http: ") {
			t.Errorf("-H %q: %+v", h, r)
		}
	}
	if hits := ts.hits(); len(hits) != 0 {
		t.Errorf("refused requests reached the server: %v", hits)
	}
}

// A URL no rule allows gets 126 with a hint naming the prefixes; one a
// rule allows for other methods names them; a path that leaves the
// prefix through dot segments (encoded or not) is checked where it leads.
func TestPolicy(t *testing.T) {
	ts := newTestServer(t, false)
	g := newGate(t, Config{Rules: []Rule{{URL: ts.URL + "/api/", AllowPrivate: true}}}, gates.Env{})
	for _, u := range []string{ts.URL + "/admin", ts.URL + "/api/../admin", ts.URL + "/api/%2e%2e/admin", ts.URL + "/apix",
		ts.URL + "/api", "http://localhost:" + ts.port() + "/api/", "https://127.0.0.1:" + ts.port() + "/api/", ts.URL + "/api/x%2F..%2F..%2Fadmin",
		ts.URL + "/api/..;/admin", ts.URL + "/api/%2e%2e;x=1/admin"} {
		r := call(t, g, nil, u)
		if r.code != gates.ExitDenied {
			t.Errorf("%s: %+v", u, r)
		}
	}
	r := call(t, g, nil, ts.URL+"/admin")
	if !strings.Contains(r.stderr, "no rule allows GET "+ts.URL+"/admin\ngatebridge: hint: http allows GET,HEAD "+ts.URL+"/api/") {
		t.Errorf("no hint naming the prefixes: %q", r.stderr)
	}
	r = call(t, g, nil, "-X", "DELETE", ts.URL+"/api/x")
	if r.code != gates.ExitDenied || !strings.Contains(r.stderr, "its rule allows GET,HEAD") {
		t.Errorf("method: %+v", r)
	}
	if hits := ts.hits(); len(hits) != 0 {
		t.Errorf("refused requests reached the server: %v", hits)
	}
	if r := call(t, g, nil, ts.URL+"/api/x/../y"); r.code != 0 || !slices.Equal(ts.hits(), []string{"/api/y"}) {
		t.Errorf("allowed: %+v, hits %v", r, ts.hits())
	}
}

// Redirects: not followed without -L; with it each hop is checked (a hop
// to a URL no rule allows, or to file://, is refused before it is
// fetched), at most 5, and a hop to another rule's host does not carry
// the first rule's headers.
func TestRedirects(t *testing.T) {
	ts := newTestServer(t, false)
	other := newTestServer(t, false)
	g := localGate(t, ts, Rule{URL: other.URL + "/open/", AllowPrivate: true})
	redirect := func(to string) string { return ts.URL + "/redirect?to=" + to }

	if r := call(t, g, nil, redirect("/echo")); r.code != 0 || r.stdout != "moved\n" || len(ts.hits()) != 1 {
		t.Errorf("without -L: %+v, hits %v", r, ts.hits())
	}
	if r := call(t, g, nil, "-L", redirect("/echo")); r.code != 0 || !strings.HasPrefix(r.stdout, "GET /echo\n") || len(r.events) != 2 || r.events[0].Status != 302 {
		t.Errorf("-L: %+v", r)
	}
	for _, to := range []string{"file:///etc/passwd", other.URL + "/closed/", "http://169.254.169.254/latest/meta-data/", "gopher://x/"} {
		if r := call(t, g, nil, "-L", redirect(to)); r.code != gates.ExitDenied || !strings.Contains(r.stderr, "redirect") {
			t.Errorf("-L to %s: %+v", to, r)
		}
	}
	if hits := other.hits(); len(hits) != 0 {
		t.Errorf("a refused hop reached the other server: %v", hits)
	}
	if r := call(t, g, nil, "-L", redirect(other.URL+"/open/echo")); r.code != 0 || strings.Contains(r.stdout, token) || !strings.Contains(r.stdout, "GET /open/echo") {
		t.Errorf("hop to another rule carried the first rule's header: %+v", r)
	}
	loop := ts.URL + "/redirect?to=/redirect%3Fto%3D/redirect%253Fto%253D/redirect%25253Fto%25253D/redirect%2525253Fto%2525253D/redirect%252525253Fto%252525253D/echo"
	if r := call(t, g, nil, "-L", loop); r.code != exitRedirects || len(r.events) != MaxRedirects+1 {
		t.Errorf("too many redirects: %d, %d events: %s", r.code, len(r.events), r.stderr)
	}
	r := call(t, g, nil, "-L", "-d", "x=1", ts.URL+"/redirect?code=303&to=/echo")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "GET /echo") {
		t.Errorf("303 after POST: %+v", r)
	}
	r = call(t, g, nil, "-L", "-d", "x=1", ts.URL+"/redirect?code=307&to=/echo")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "POST /echo") || !strings.HasSuffix(r.stdout, "\nx=1") {
		t.Errorf("307 after POST: %+v", r)
	}
}

// No SSRF: a name that resolves to a non-public address is refused
// (every address it resolves to is checked), metadata even with
// allow_private; a rule's name is resolved once and the checked address
// is the one connected to; proxy variables are ignored.
func TestSSRF(t *testing.T) {
	ts := newTestServer(t, false)
	proxy := newTestServer(t, false)
	for _, v := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"} {
		t.Setenv(v, proxy.URL)
	}
	t.Setenv("NO_PROXY", "")
	fl := &fakeLookup{addrs: map[string][]netip.Addr{
		"svc.test":      addrs("127.0.0.1"),
		"mixed.test":    addrs("93.184.215.14", "127.0.0.1"),
		"metadata.test": addrs("169.254.169.254"),
		"mapped.test":   addrs("::ffff:127.0.0.1"),
	}}
	g := newGate(t, Config{Rules: []Rule{
		{URL: "http://svc.test:" + ts.port() + "/"},
		{URL: "http://mixed.test:" + ts.port() + "/"},
		{URL: "http://mapped.test:" + ts.port() + "/"},
		{URL: "http://metadata.test/", AllowPrivate: true},
		{URL: "https://api.github.com/"},
	}}, gates.Env{})
	g.lookup = fl.lookup
	for _, r := range g.rules {
		if r.transport.Proxy != nil {
			t.Fatal("a rule's transport has a proxy") // (ProxyFromEnvironment reads the env once per process)
		}
	}
	for _, u := range []string{"http://svc.test:" + ts.port() + "/echo", "http://mixed.test:" + ts.port() + "/echo",
		"http://mapped.test:" + ts.port() + "/echo", "http://metadata.test/latest/meta-data/",
		"http://[::ffff:169.254.169.254]/", "http://2130706433/", "http://0x7f.1/", "http://[::1]/"} {
		if r := call(t, g, nil, u); r.code != gates.ExitDenied {
			t.Errorf("%s: %+v", u, r)
		}
	}
	if hits := append(ts.hits(), proxy.hits()...); len(hits) != 0 {
		t.Errorf("refused requests reached a server: %v", hits)
	}

	// allow_private: the rule's name, resolved by the gate alone (the
	// system cannot resolve svc.test), reaches the server directly.
	fl.n = 0
	g2 := newGate(t, Config{Rules: []Rule{{URL: "http://svc.test:" + ts.port() + "/", AllowPrivate: true}}}, gates.Env{})
	g2.lookup = fl.lookup
	r := call(t, g2, nil, "http://SVC.test:"+ts.port()+"/echo")
	if r.code != 0 || !strings.Contains(r.stdout, "GET /echo") || fl.n != 1 || len(proxy.hits()) != 0 {
		t.Errorf("allow_private by name: %+v, %d lookups, proxy hits %v", r, fl.n, proxy.hits())
	}
}

// Bodies: -d (POST, form type), --data-binary @- from stdin (exact),
// -d @- (line breaks dropped), a sandbox file refused (the host cannot
// read it), a body over max_request_bytes refused before anything is
// sent, a response over max_response_bytes cut with exit 63.
func TestBodies(t *testing.T) {
	ts := newTestServer(t, false)
	g := newGate(t, Config{MaxRequestBytes: 100, MaxResponseBytes: 1000, Rules: []Rule{{URL: ts.URL + "/", Methods: []string{"GET", "POST", "PUT"}, AllowPrivate: true}}}, gates.Env{})
	r := call(t, g, nil, "-d", "a=1", "-d", "b=2", ts.URL+"/echo")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "POST /echo\n") || !strings.Contains(r.stdout, "Content-Type: application/x-www-form-urlencoded") || !strings.HasSuffix(r.stdout, "\n\na=1&b=2") {
		t.Errorf("-d: %+v", r)
	}
	r = call(t, g, []byte("line1\r\nline2\n"), "-X", "PUT", "-H", "Content-Type: text/plain", "--data-binary", "@-", ts.URL+"/echo")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "PUT /echo\n") || !strings.Contains(r.stdout, "Content-Type: text/plain\n") || !strings.HasSuffix(r.stdout, "\n\nline1\r\nline2\n") {
		t.Errorf("--data-binary @-: %+v", r)
	}
	if r = call(t, g, []byte("a\nb\n"), "-d", "@-", ts.URL+"/echo"); !strings.HasSuffix(r.stdout, "\n\nab") {
		t.Errorf("-d @-: %+v", r)
	}
	if r = call(t, g, nil, "--data-binary", "@-", ts.URL+"/echo"); r.code != gates.ExitUsage {
		t.Errorf("@- with no stdin: %+v", r)
	}
	before := len(ts.hits())
	if r = call(t, g, nil, "-d", "@/etc/passwd", ts.URL+"/echo"); r.code != gates.ExitUsage || !strings.Contains(r.stderr, "--data-binary @- < FILE") {
		t.Errorf("-d @file: %+v", r)
	}
	if r = call(t, g, make([]byte, 101), "--data-binary", "@-", ts.URL+"/echo"); r.code != gates.ExitDenied || !strings.Contains(r.stderr, "max_request_bytes (100)") {
		t.Errorf("big body: %+v", r)
	}
	if len(ts.hits()) != before {
		t.Errorf("refused bodies were sent: %v", ts.hits()[before:])
	}
	r = call(t, g, nil, ts.URL+"/big?n=5000")
	if r.code != exitTooBig || len(r.stdout) != 1000 || !strings.Contains(r.stderr, "max_response_bytes (1000)") || r.events[0].Bytes != 1000 {
		t.Errorf("big response: code %d, %d bytes, %q %+v", r.code, len(r.stdout), r.stderr, r.events)
	}
}

// lineWriter reports its first write.
type lineWriter struct {
	mu    sync.Mutex
	b     strings.Builder
	first chan struct{}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len() == 0 {
		close(w.first)
	}
	return w.b.Write(p)
}

// The body streams: its first line reaches stdout while the server still
// holds the rest (with no secret to redact: a redactor holds back as many
// bytes as the longest secret has, less one); --max-time ends a slow body
// with 124, what came written, but with a secret active what the redactor
// held dropped; -f turns a 404 into 22 with no body.
func TestStreamTimeoutFail(t *testing.T) {
	ts := newTestServer(t, false)
	open := func(ts *testServer) *Gate {
		return newGate(t, Config{Rules: []Rule{{URL: ts.URL + "/", AllowPrivate: true}}}, gates.Env{})
	}
	g := open(ts)
	w := &lineWriter{first: make(chan struct{})}
	done := make(chan int)
	go func() {
		code, err := g.Call(context.Background(), &gates.Call{Args: []string{ts.URL + "/slow"}, Stdout: w, Stderr: w})
		done <- gates.ExitCodeOf(code, err)
	}()
	select {
	case <-w.first:
	case <-time.After(3 * time.Second):
		t.Fatal("the first line did not stream")
	}
	close(ts.release)
	if code := <-done; code != 0 || w.b.String() != "first\nsecond\n" {
		t.Errorf("stream: %d %q", code, w.b.String())
	}

	ts2 := newTestServer(t, false)
	for _, g2 := range []*Gate{open(ts2), localGate(t, ts2)} {
		want := "first\n"
		if g2.secrets != nil {
			want = ""
		}
		start := time.Now()
		r := call(t, g2, nil, "--max-time", "0.3", ts2.URL+"/slow")
		if r.code != gates.ExitTimeout || r.stdout != want || time.Since(start) > 3*time.Second || !strings.Contains(r.stderr, "--max-time") {
			t.Errorf("--max-time: %+v after %v", r, time.Since(start))
		}
	}
	g2 := localGate(t, ts2)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	code, err := g2.Call(ctx, &gates.Call{Args: []string{ts2.URL + "/slow"}, Stdout: &strings.Builder{}, Stderr: &strings.Builder{}})
	if gates.ExitCodeOf(code, err) != gates.ExitTimeout || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("gate timeout: %d %v", code, err)
	}

	g = localGate(t, ts)
	if r := call(t, g, nil, "-f", ts.URL+"/status?code=404"); r.code != exitHTTPError || r.stdout != "" || !strings.Contains(r.stderr, "404") {
		t.Errorf("-f: %+v", r)
	}
	if r := call(t, g, nil, "-sSfL", ts.URL+"/status?code=200"); r.code != 0 || r.stdout != "status body\n" {
		t.Errorf("-sSfL: %+v", r)
	}
}

// HTTPS with a private CA: trusted through the rule's ca_file, refused
// (exit 60) without it.
func TestHTTPSWithCAFile(t *testing.T) {
	ts := newTestServer(t, true)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o600)
	g := newGate(t, Config{Rules: []Rule{{URL: ts.URL + "/", AllowPrivate: true, CAFile: ca}}}, gates.Env{})
	if r := call(t, g, nil, ts.URL+"/echo"); r.code != 0 || !strings.HasPrefix(r.stdout, "GET /echo") {
		t.Errorf("with ca_file: %+v", r)
	}
	g = newGate(t, Config{Rules: []Rule{{URL: ts.URL + "/", AllowPrivate: true}}}, gates.Env{})
	if r := call(t, g, nil, ts.URL+"/echo"); r.code != exitCert {
		t.Errorf("without ca_file: %+v", r)
	}
}

// Usage and help.
func TestArgs(t *testing.T) {
	ts := newTestServer(t, false)
	g := localGate(t, ts)
	for _, args := range [][]string{{}, {"-X"}, {"--bogus", ts.URL}, {"-Z", ts.URL}, {ts.URL, ts.URL}, {"--max-time", "x", ts.URL},
		{"-H", "no colon", ts.URL}, {"-X", "CONNECT", ts.URL}, {"api.github.com/x"}} {
		if r := call(t, g, nil, args...); r.code != gates.ExitUsage && r.code != gates.ExitDenied {
			t.Errorf("%q: %+v", args, r)
		}
	}
	r := call(t, g, nil, "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "GET,POST   "+ts.URL+"/") || !strings.Contains(r.stdout, "126 refused by policy") {
		t.Errorf("--help: %+v", r)
	}
	if r := call(t, g, nil, "-XPOST", "-HX-A: 1", "--data=z", "--", ts.URL+"/echo"); r.code != 0 || !strings.HasPrefix(r.stdout, "POST /echo") || !strings.Contains(r.stdout, "X-A: 1") {
		t.Errorf("clustered forms: %+v", r)
	}
	if len(ts.hits()) != 1 {
		t.Errorf("hits %v", ts.hits())
	}
	if sp := g.Spec(); sp.Stdin != gates.StdinIfAtDash || sp.Name != "http" || !strings.Contains(sp.Summary, ts.URL) {
		t.Errorf("spec %+v", sp)
	}
}

// Bad config: each an error naming the setting, with a hint.
func TestConfigErrors(t *testing.T) {
	st := testStore(t, token)
	ws := t.TempDir()
	inWS := filepath.Join(ws, "ca.pem")
	os.WriteFile(inWS, []byte("x"), 0o600)
	notPEM := filepath.Join(t.TempDir(), "x.pem")
	os.WriteFile(notPEM, []byte("not a cert"), 0o600)
	for _, tc := range []struct {
		c     Config
		field string
	}{
		{Config{}, "rules"},
		{Config{Timeout: -1, Rules: []Rule{{URL: "https://x/"}}}, "timeout"},
		{Config{Rules: []Rule{{URL: "api.github.com/repos/"}}}, "rules[0].url"},
		{Config{Rules: []Rule{{URL: "/repos/"}}}, "rules[0].url"},
		{Config{Rules: []Rule{{URL: "https://x/"}, {URL: ""}}}, "rules[1].url"},
		{Config{Rules: []Rule{{URL: "https://x/?a=1"}}}, "rules[0].url"},
		{Config{Rules: []Rule{{URL: "ftp://x/"}}}, "rules[0].url"},
		{Config{Rules: []Rule{{URL: "https://u:p@x/"}}}, "rules[0].url"},
		{Config{Rules: []Rule{{URL: "https://x/${secret:gh}"}}}, "rules[0].url"},
		{Config{Rules: []Rule{{URL: "http://127.0.0.1:8080/"}}}, "rules[0].url"},
		{Config{Rules: []Rule{{URL: "https://x/", Methods: []string{"CONNECT"}}}}, "rules[0].methods"},
		{Config{Rules: []Rule{{URL: "https://x/", Headers: map[string]string{"host": "y"}}}}, "rules[0].headers"},
		{Config{Rules: []Rule{{URL: "https://x/", Headers: map[string]string{"x": "${secret:nope}"}}}}, "rules[0].headers"},
		{Config{Rules: []Rule{{URL: "https://x/", Headers: map[string]string{"x": "${secret:gh"}}}}, "rules[0].headers"},
		{Config{Rules: []Rule{{URL: "https://x/", CAFile: inWS}}}, "rules[0].ca_file"},
		{Config{Rules: []Rule{{URL: "https://x/", CAFile: notPEM}}}, "rules[0].ca_file"},
		{Config{Rules: []Rule{{URL: "http://x/", CAFile: notPEM}}}, "rules[0].ca_file"},
	} {
		_, err := New(context.Background(), tc.c, gates.Env{Secrets: st, Untrusted: []string{ws}})
		var se *gates.SettingError
		if !errors.As(err, &se) || se.Field != tc.field || se.Help("k") == "" {
			t.Errorf("%+v: %v (field %q)", tc.c, err, func() string {
				if se != nil {
					return se.Field
				}
				return ""
			}())
		}
	}
	// Through the kind.
	kinds := gates.NewKindRegistry()
	if err := Register(kinds); err != nil {
		t.Fatal(err)
	}
	k, err := kinds.Lookup(KindHTTP)
	if err != nil {
		t.Fatal(err)
	}
	reg := gates.NewRegistry()
	defer reg.Close()
	if names, err := k.Add(context.Background(), reg, Config{Name: "gh_api", Rules: []Rule{{URL: "https://api.github.com/repos/"}}}, gates.Env{}); err != nil || !slices.Equal(names, []string{"gh_api"}) {
		t.Errorf("kind: %v %v", names, err)
	}
}

// A server that quotes the request back (the rule's token with it) is
// redacted only if what it sends is the token as bytes: the sandbox may
// not ask for an encoding (gzip hides the token from the redactor) or a
// range (a piece shorter than the token is not redacted, and pieces add
// up). Without those headers the gate decodes gzip itself, and the token
// reaches the sandbox as [secret:gh].
func TestReflectedSecretStaysRedactable(t *testing.T) {
	ts := newTestServer(t, false)
	g := localGate(t, ts)
	for _, h := range []string{"Accept-Encoding: gzip", "accept-encoding: gzip, br", "Accept-Encoding: identity;q=0, gzip",
		"Range: bytes=0-14", "range: bytes=15-", "If-Range: x"} {
		r := call(t, g, nil, "-H", h, ts.URL+"/reflect")
		if r.code != gates.ExitDenied || !strings.Contains(r.stderr, "refused") {
			t.Errorf("-H %q: %+v", h, r)
		}
	}
	if hits := ts.hits(); len(hits) != 0 {
		t.Errorf("refused requests reached the server: %v", hits)
	}
	red := g.secrets.Redactor()
	var out bytes.Buffer
	w := red.Writer(&out)
	c := &gates.Call{Args: []string{"-i", ts.URL + "/reflect"}, Stdout: w, Stderr: io.Discard}
	code, err := g.Call(context.Background(), c)
	w.Flush()
	if code != 0 || err != nil || !strings.Contains(out.String(), "Bearer [secret:gh]") || strings.Contains(out.String(), token[:8]) {
		t.Errorf("plain request: %d %v %q", code, err, out.String())
	}
}

// A response cut at max_response_bytes (a place the sandbox chooses, by
// the length of what the server quotes before the token) does not end
// with the start of the token: the gate redacts before it cuts, and drops
// what the redactor held at the cut.
func TestCutResponseLeavesNoPartialSecret(t *testing.T) {
	ts := newTestServer(t, false)
	full := call(t, localGate(t, ts), nil, ts.URL+"/echo")
	at := strings.Index(full.stdout, "Bearer [secret:gh]")
	if at < 0 {
		t.Fatalf("the server does not quote the token: %q", full.stdout)
	}
	at += len("Bearer ")
	g := newGate(t, Config{MaxResponseBytes: int64(at + 12), Rules: []Rule{{URL: ts.URL + "/", AllowPrivate: true,
		Headers: map[string]string{"authorization": "Bearer ${secret:gh}"}}}}, gates.Env{Secrets: testStore(t, token)})
	var out bytes.Buffer
	w := g.secrets.Redactor().Writer(&out) // the dispatcher's
	code, err := g.Call(context.Background(), &gates.Call{Args: []string{ts.URL + "/echo"}, Stdout: w, Stderr: io.Discard})
	w.Flush()
	if gates.ExitCodeOf(code, err) != exitTooBig || strings.Contains(out.String(), token[:12]) || !strings.HasPrefix(out.String(), "GET /echo\n") {
		t.Errorf("exit %d (%v), out %q", gates.ExitCodeOf(code, err), err, out.String())
	}
}
