// Package httpgate is the "http" gate kind: HTTP requests from the
// sandbox, made by the host, to an allowlist of URL prefixes, with
// credentials the sandbox never sees.
//
// # In the sandbox
//
// A curl-like subset models already know:
//
//	http [-X METHOD] [-H 'Name: value']... [-d DATA | --data-binary @-] [-i] [-f] [-L] [-s] [-S] [--max-time S] URL
//
// The body goes to stdout as it arrives; http --help lists the options,
// the allowed prefixes and the exit codes (those of curl where curl has
// one: 6, 7, 22, 47, 56, 60, 63; 124 on timeout; 126 for what the policy
// refuses).
//
// # Policy
//
// Each request is checked on its canonical URL (see parseURL: no
// userinfo, the host lower-cased and IDNA-encoded or an IP address in its
// one form, dot segments resolved, percent-encoding normalized), which is
// also the URL sent. A [Rule] allows a URL prefix, on path-segment
// boundaries, for some methods (default GET and HEAD). With -L every
// redirect hop is checked the same way (at most [MaxRedirects]), and each
// hop gets the headers of its own rule.
//
// The host of a request is resolved once; every address is checked, and
// the connection goes to a checked address (no second lookup): loopback,
// private, link-local, multicast, unspecified and other special addresses
// are refused unless the rule says AllowPrivate; cloud metadata endpoints
// are refused even then, unless the rule names the address itself. Proxy
// environment variables are ignored.
//
// A rule's Headers are set on its requests; their values may reference
// secrets (${secret:NAME}, see package secrets), read when the gate is
// made and again (for a refresh) at each request. The sandbox cannot set
// a header any rule sets, nor Host, hop-by-hop, Content-Length or Proxy-*
// headers, nor a method override (X-HTTP-Method-Override, …), nor
// Accept-Encoding, Range or If-Range (a secret a server
// quotes back would come compressed or in pieces, past the redactor), nor
// a value with a line break. Bodies are capped
// ([Config.MaxRequestBytes], [Config.MaxResponseBytes]). Each request is
// an event of the call's record ([gates.Call].Audit): method, canonical
// URL, rule index, status, bytes.
package httpgate

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/netip"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/gates/secrets"
	"github.com/gatebridge/gatebridge/internal/hint"
)

// KindHTTP is the name of the kind [Register] adds.
const KindHTTP = "http"

// Defaults and bounds.
const (
	DefaultName             = "http"
	DefaultMaxResponseBytes = 4 << 20
	DefaultMaxRequestBytes  = 1 << 20
	MaxRedirects            = 5
	maxCAFileBytes          = 1 << 20
)

// Config is one http gate (gates.http[i] in gatebridge's config).
type Config struct {
	// Name is the command in the sandbox; "" means "http".
	Name string
	// Timeout bounds one call, redirects included; 0 means the session's
	// gate timeout.
	Timeout time.Duration
	// MaxResponseBytes caps the body written to stdout: past it the
	// response is cut and the call exits 63. 0 means
	// DefaultMaxResponseBytes. (The bridge's output cap,
	// bridge.limits.max_output_bytes, applies too.)
	MaxResponseBytes int64
	// MaxRequestBytes caps a request body (-d, --data-binary); 0 means
	// DefaultMaxRequestBytes.
	MaxRequestBytes int64
	// Rules are the URLs the gate may reach; the first that allows a
	// request's URL and method is its rule. At least one.
	Rules []Rule
}

// Rule allows requests to a URL prefix.
type Rule struct {
	// URL is an absolute http or https URL: its scheme, host and port must
	// be the request's, and its path a prefix of the request's, on
	// path-segment boundaries (https://api.github.com/repos/ and
	// https://api.github.com/repos allow /repos/x, neither /repository).
	URL string
	// Methods are the methods allowed; none means GET and HEAD.
	Methods []string
	// Headers are set on every request of this rule (names are
	// case-insensitive); values may reference secrets.
	Headers map[string]string
	// AllowPrivate lets the rule reach loopback, private and other
	// non-public addresses (a service on the host or the LAN).
	AllowPrivate bool
	// CAFile is a PEM file of the CAs an https rule trusts instead of the
	// system's (a private CA).
	CAFile string
}

// Register adds the "http" kind ([KindHTTP]) to kinds; its settings are a
// [Config], its gate made by [New].
func Register(kinds *gates.KindRegistry) error {
	return kinds.Register(gates.KindOf(KindHTTP, "HTTP requests (curl-like) to an allowlist of URL prefixes, with credentials the sandbox never sees",
		gates.FailOnClash, func(ctx context.Context, c Config, env gates.Env) ([]gates.Gate, error) {
			g, err := New(ctx, c, env)
			if err != nil {
				return nil, err
			}
			return []gates.Gate{g}, nil
		}))
}

// Gate is an http gate. Close releases its idle connections.
type Gate struct {
	spec      gates.Spec
	rules     []*rule
	injected  map[string]bool // header names some rule sets
	maxResp   int64
	maxReq    int64
	secrets   *secrets.Store
	untrusted []string
	lookup    func(ctx context.Context, host string) ([]netip.Addr, error)
}

var (
	_ gates.Gate      = (*Gate)(nil)
	_ gates.Closer    = (*Gate)(nil)
	_ gates.HelpOwner = (*Gate)(nil)
)

type rule struct {
	index     int
	prefix    canonURL
	methods   []string
	headers   [][2]string // canonical name, value (may reference secrets)
	transport *http.Transport
}

// covers reports whether u is under r's prefix.
func (r *rule) covers(u canonURL) bool {
	return u.scheme == r.prefix.scheme && u.host == r.prefix.host && u.port == r.prefix.port && underPrefix(u.path, r.prefix.path)
}

// settingError names the setting at fault.
func settingError(field, help string, format string, a ...any) error {
	return &gates.SettingError{Field: field, Err: fmt.Errorf(format, a...), Help: func(string) string { return help }}
}

// New checks c and makes its gate. Secrets its rules' headers reference
// are read now (env.Secrets), so that one that cannot be read is an
// error. Errors naming a setting are [*gates.SettingError]s ("name",
// "timeout", "rules", "rules[1].url", …).
func New(ctx context.Context, c Config, env gates.Env) (*Gate, error) {
	name := c.Name
	if name == "" {
		name = DefaultName
	}
	switch {
	case c.Timeout < 0:
		return nil, settingError("timeout", "a duration such as 30s; 0 means bridge.limits.gate_timeout", "negative")
	case c.MaxResponseBytes < 0:
		return nil, settingError("max_response_bytes", "a number of bytes; 0 means the default", "negative")
	case c.MaxRequestBytes < 0:
		return nil, settingError("max_request_bytes", "a number of bytes; 0 means the default", "negative")
	case len(c.Rules) == 0:
		return nil, settingError("rules", "list the URL prefixes it may reach, e.g. rules: [{url: https://api.github.com/repos/}]",
			"an http gate needs at least one rule")
	}
	g := &Gate{
		injected: map[string]bool{}, maxResp: c.MaxResponseBytes, maxReq: c.MaxRequestBytes,
		secrets: env.Secrets, untrusted: env.Untrusted, lookup: systemLookup,
	}
	if g.maxResp == 0 {
		g.maxResp = DefaultMaxResponseBytes
	}
	if g.maxReq == 0 {
		g.maxReq = DefaultMaxRequestBytes
	}
	for i, rc := range c.Rules {
		r, err := g.newRule(ctx, i, rc)
		if err != nil {
			g.Close()
			return nil, err
		}
		g.rules = append(g.rules, r)
	}
	g.spec = gates.Spec{
		Name:     name,
		Summary:  "HTTP request (curl-like) through the host's allowlist: " + cut(g.allowed(), 300),
		Usage:    name + " [-X METHOD] [-H 'Name: value']... [-d DATA | --data-binary @-] [-i] [-f] [-L] [-s] [-S] [--max-time S] URL",
		Params:   params,
		Stdin:    gates.StdinIfAtDash,
		Timeout:  c.Timeout,
		DashDash: true,
	}
	return g, nil
}

var params = []gates.Param{
	{Name: "-X", Description: "the method (default GET, or POST with a body)", Flag: true},
	{Name: "-H", Description: "a request header, 'Name: value'", Flag: true},
	{Name: "--data-binary", Description: "the request body as it is (@- reads it from stdin)", Flag: true},
	{Name: "-i", Description: "print the status line and headers before the body", Flag: true, Type: "boolean"},
	{Name: "-f", Description: "exit 22, printing no body, when the status is 400 or more", Flag: true, Type: "boolean"},
	{Name: "-L", Description: "follow redirects to allowed URLs (at most 5)", Flag: true, Type: "boolean"},
	{Name: "--max-time", Description: "seconds before giving up (exit 124)", Flag: true, Type: "number"},
	{Name: "url", Description: "the URL, under a prefix the gate allows", Required: true},
}

// newRule checks rule i and makes its transport.
func (g *Gate) newRule(ctx context.Context, i int, rc Rule) (*rule, error) {
	key := fmt.Sprintf("rules[%d]", i)
	const urlHelp = "write an absolute URL prefix with its scheme, e.g. https://api.github.com/repos/"
	raw, err := url.Parse(rc.URL)
	switch {
	case rc.URL == "":
		return nil, settingError(key+".url", urlHelp, "missing")
	case secrets.Mentions(rc.URL):
		return nil, settingError(key+".url", "pass a secret in the rule's headers", "a url cannot reference a secret: only headers take ${secret:NAME}")
	case err != nil:
		return nil, settingError(key+".url", urlHelp, "%q: %v", rc.URL, errors.Unwrap(err))
	case raw.Scheme == "" || raw.Host == "":
		return nil, settingError(key+".url", urlHelp, "%q is not an absolute URL (no scheme or no host)", rc.URL)
	case raw.RawQuery != "" || raw.ForceQuery || raw.Fragment != "":
		return nil, settingError(key+".url", "a rule is a prefix of paths: drop the ?query and #fragment", "%q has a query or a fragment", rc.URL)
	}
	prefix, err := parseURL(rc.URL)
	if err != nil {
		return nil, settingError(key+".url", urlHelp, "%v", err)
	}
	r := &rule{index: i, prefix: prefix}
	if prefix.ip.IsValid() {
		if why := addrRefusal(prefix.ip, rc.AllowPrivate, netip.Addr{}); why != "" && why != "a cloud metadata endpoint" {
			return nil, settingError(key+".url", "add allow_private: true to the rule if it should reach it",
				"%s is a %s address, which needs allow_private", prefix.host, why)
		}
	}
	for _, m := range rc.Methods {
		m = strings.ToUpper(strings.TrimSpace(m))
		if !httpguts.ValidHeaderFieldName(m) || m == "CONNECT" {
			return nil, settingError(key+".methods", "list methods such as GET, POST", "%q is not a method allowed here", m)
		}
		r.methods = append(r.methods, m)
	}
	if len(r.methods) == 0 {
		r.methods = []string{"GET", "HEAD"}
	}
	names := slices.Sorted(maps.Keys(rc.Headers))
	for _, n := range names {
		v := rc.Headers[n]
		cn := textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(n))
		if !httpguts.ValidHeaderFieldName(cn) {
			return nil, settingError(key+".headers", "header names are tokens such as Authorization", "%q is not a header name", n)
		}
		if why := headerRefusal(cn); why != "" {
			return nil, settingError(key+".headers", "drop it: gatebridge sets it", "%s cannot be set: %s", cn, why)
		}
		if _, err := secrets.Refs(v); err != nil {
			return nil, settingError(key+".headers", hint.Of(err), "%s: %v", cn, err)
		}
		exp, err := g.secrets.Expand(ctx, v, g.untrusted)
		if err != nil {
			return nil, settingError(key+".headers", hint.Of(err), "%s: %v", cn, err)
		}
		if !httpguts.ValidHeaderFieldValue(exp) {
			return nil, settingError(key+".headers", "a header value is one line of text", "%s: the value (or a secret in it) holds a line break or a control character", cn)
		}
		r.headers = append(r.headers, [2]string{cn, v})
		g.injected[cn] = true
	}
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	if rc.CAFile != "" {
		if prefix.scheme != "https" {
			return nil, settingError(key+".ca_file", "drop ca_file, or make the rule https", "ca_file is for an https rule")
		}
		pool, err := readCAFile(rc.CAFile, g.untrusted)
		if err != nil {
			return nil, settingError(key+".ca_file", "give a PEM file of CA certificates, outside what the sandbox can write", "%v", err)
		}
		tlsConf.RootCAs = pool
	}
	d := &dialer{allowPrivate: rc.AllowPrivate, ruleIP: prefix.ip, lookup: func(ctx context.Context, h string) ([]netip.Addr, error) { return g.lookup(ctx, h) }}
	r.transport = &http.Transport{
		Proxy:                  nil, // never the environment's proxies
		DialContext:            d.dial,
		TLSClientConfig:        tlsConf,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           4,
		IdleConnTimeout:        30 * time.Second,
		TLSHandshakeTimeout:    15 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 256 << 10,
	}
	return r, nil
}

// readCAFile reads a PEM file of CAs, not from where the sandbox writes.
func readCAFile(p string, untrusted []string) (*x509.CertPool, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, err
	}
	if u := gates.UntrustedDir(untrusted, real, abs); u != "" {
		return nil, fmt.Errorf("%s is inside %s, which the sandbox can write", p, u)
	}
	f, err := os.Open(real)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCAFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxCAFileBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", p, maxCAFileBytes)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", p)
	}
	return pool, nil
}

// allowed lists the rules: "GET,HEAD https://api.github.com/repos/; …".
func (g *Gate) allowed() string {
	var parts []string
	for i, r := range g.rules {
		if i == 10 {
			parts = append(parts, fmt.Sprintf("and %d more", len(g.rules)-i))
			break
		}
		parts = append(parts, strings.Join(r.methods, ",")+" "+r.prefix.String())
	}
	return strings.Join(parts, "; ")
}

// Spec describes the gate.
func (g *Gate) Spec() gates.Spec { return g.spec }

// OwnsHelp implements [gates.HelpOwner]: the gate prints its own help.
func (g *Gate) OwnsHelp(arg string) bool { return arg == "--help" || arg == "-h" }

// Close releases the idle connections.
func (g *Gate) Close() error {
	for _, r := range g.rules {
		r.transport.CloseIdleConnections()
	}
	return nil
}

// match returns the rule that allows method on u.
func (g *Gate) match(u canonURL, method string) (*rule, error) {
	var forURL []*rule
	for _, r := range g.rules {
		if r.covers(u) {
			if slices.Contains(r.methods, method) {
				return r, nil
			}
			forURL = append(forURL, r)
		}
	}
	if len(forURL) > 0 {
		return nil, gates.Deniedf("%s %s: not allowed (its rule allows %s)", method, u, strings.Join(forURL[0].methods, ","))
	}
	return nil, gates.Deniedf("no rule allows %s %s\ngatebridge: hint: %s allows %s", method, u, g.spec.Name, g.allowed())
}

// Exit codes (curl's where curl has one).
const (
	exitResolve   = 6
	exitConnect   = 7
	exitHTTPError = 22
	exitRedirects = 47
	exitRecv      = 56
	exitCert      = 60
	exitTooBig    = 63
)

var errMaxTime = errors.New("--max-time")

// event is the audit record of one request.
type event struct {
	Kind   string `json:"kind"`
	Method string `json:"method"`
	URL    string `json:"url"`
	Rule   int    `json:"rule"`
	Status int    `json:"status,omitempty"`
	Bytes  int64  `json:"bytes"`
	Error  string `json:"error,omitempty"`
}

// Call makes the request the arguments describe (see the package doc).
func (g *Gate) Call(ctx context.Context, c *gates.Call) (int, error) {
	if len(c.Args) == 1 && g.OwnsHelp(c.Args[0]) {
		io.WriteString(c.Stdout, g.help())
		return 0, nil
	}
	req, err := parseArgs(c.Args, c.Stdin, g.maxReq)
	if err != nil {
		return 0, err
	}
	for _, h := range req.headers {
		if g.injected[h.name] {
			return 0, gates.Deniedf("header %s is set by the gate's rules: it cannot be set or overridden", h.name)
		}
	}
	cur, err := parseURL(req.url)
	if err != nil {
		return 0, urlErr(err, "")
	}
	if req.maxTime > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, req.maxTime, errMaxTime)
		defer cancel()
	}
	audit := func(e event) {
		if c.Audit != nil {
			c.Audit(e)
		}
	}
	// The response is redacted here, before it is capped or cut short:
	// a cut that splits a secret a server quotes back would leave its
	// start, which no later redaction recognizes.
	out := g.secrets.Redactor().Writer(c.Stdout)
	cutShort := false
	defer func() {
		if cutShort {
			out.Cut()
		} else {
			out.Flush()
		}
	}()
	method, body, hasBody := req.method, req.body(), req.hasData
	for hop := 0; ; hop++ {
		r, err := g.match(cur, method)
		if err != nil {
			if hop > 0 {
				return 0, gates.Deniedf("redirect refused: %v", err)
			}
			return 0, err
		}
		ev := event{Kind: "http_request", Method: method, URL: cur.String(), Rule: r.index}
		resp, err := g.send(ctx, r, method, cur, body, hasBody, req.headers)
		if err != nil {
			ev.Error = err.Error()
			audit(ev)
			return g.failure(ctx, err, req)
		}
		ev.Status = resp.StatusCode
		loc := resp.Header.Get("Location")
		if req.location && isRedirect(resp.StatusCode) && loc != "" {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			audit(ev)
			if req.include {
				writeHead(out, resp)
			}
			if hop == MaxRedirects {
				return 0, &gates.ExitError{Code: exitRedirects, Err: fmt.Errorf("more than %d redirects", MaxRedirects)}
			}
			next, err := resolveRedirect(cur, loc)
			if err != nil {
				return 0, urlErr(err, "redirect to "+cut(loc, 100)+" refused: ")
			}
			if resp.StatusCode == 303 && method != "HEAD" || (resp.StatusCode == 301 || resp.StatusCode == 302) && method == "POST" {
				method, body, hasBody = "GET", "", false
			}
			cur = next
			continue
		}
		if req.fail && resp.StatusCode >= 400 {
			resp.Body.Close()
			audit(ev)
			return 0, &gates.ExitError{Code: exitHTTPError, Err: fmt.Errorf("the requested URL returned error: %s", resp.Status)}
		}
		if req.include {
			writeHead(out, resp)
		}
		n, err := copyBody(out, resp.Body, g.maxResp)
		resp.Body.Close()
		ev.Bytes = n
		if err != nil {
			ev.Error = err.Error()
			cutShort = true
		}
		audit(ev)
		if err != nil {
			return g.failure(ctx, err, req)
		}
		return 0, nil
	}
}

// send makes one request of rule r: the sandbox's headers, then r's (a
// secret read again if its refresh has passed), then the defaults.
func (g *Gate) send(ctx context.Context, r *rule, method string, u canonURL, body string, hasBody bool, hs []header) (*http.Response, error) {
	var rd io.Reader
	if hasBody {
		rd = strings.NewReader(body)
	}
	hr, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	hr.Header.Set("User-Agent", "gatebridge-http")
	hr.Header.Set("Accept", "*/*")
	if hasBody {
		hr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for _, h := range hs {
		hr.Header.Del(h.name) // a default the sandbox sets or drops
	}
	for _, h := range hs {
		if h.value != "" {
			hr.Header.Add(h.name, h.value)
		}
	}
	for _, h := range r.headers {
		v, err := g.secrets.Expand(ctx, h[1], g.untrusted)
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", h[0], err)
		}
		hr.Header.Set(h[0], v)
	}
	return r.transport.RoundTrip(hr)
}

// failure maps a request's error to the call's exit.
func (g *Gate) failure(ctx context.Context, err error, req *request) (int, error) {
	var ref *refusedError
	var le *lookupError
	var ce *connectError
	var ee *gates.ExitError
	var ve *tls.CertificateVerificationError
	switch {
	case context.Cause(ctx) == errMaxTime:
		return 0, &gates.ExitError{Code: gates.ExitTimeout, Err: fmt.Errorf("timed out after %v (--max-time)", req.maxTime)}
	case ctx.Err() != nil:
		return 0, fmt.Errorf("request: %w", ctx.Err())
	case errors.As(err, &ee):
		return 0, err
	case errors.As(err, &ref):
		return 0, gates.Deniedf("%s", ref.msg)
	case errors.As(err, &le):
		return 0, &gates.ExitError{Code: exitResolve, Err: le}
	case errors.As(err, &ce):
		return 0, &gates.ExitError{Code: exitConnect, Err: ce}
	case errors.As(err, &ve):
		return 0, &gates.ExitError{Code: exitCert, Err: fmt.Errorf("the server's certificate is not trusted: %v", err)}
	}
	return 0, &gates.ExitError{Code: exitRecv, Err: err}
}

// urlErr maps a URL's refusal: policy 126, else usage 2.
func urlErr(err error, prefix string) error {
	var ue *urlError
	if errors.As(err, &ue) && ue.denied {
		return gates.Deniedf("%s%s", prefix, ue.msg)
	}
	if prefix != "" {
		return gates.Deniedf("%s%v", prefix, err)
	}
	return gates.Usagef("%v", err)
}

func isRedirect(code int) bool {
	return code == 301 || code == 302 || code == 303 || code == 307 || code == 308
}

// resolveRedirect makes a Location canonical, relative to cur.
func resolveRedirect(cur canonURL, loc string) (canonURL, error) {
	base, err := url.Parse(cur.String())
	if err != nil {
		return canonURL{}, err
	}
	ref, err := base.Parse(loc)
	if err != nil {
		return canonURL{}, deniedURL("bad Location %q", cut(loc, 100))
	}
	return parseURL(ref.String())
}

// writeHead writes the status line and the headers, as curl -i does.
func writeHead(w io.Writer, resp *http.Response) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s\r\n", resp.Proto, resp.Status)
	names := slices.Sorted(maps.Keys(resp.Header))
	for _, n := range names {
		for _, v := range resp.Header[n] {
			fmt.Fprintf(&b, "%s: %s\r\n", n, v)
		}
	}
	b.WriteString("\r\n")
	w.Write(b.Bytes())
}

// copyBody writes the body to w as it arrives, up to max bytes: past it
// the rest is not read and the call fails (exit 63).
func copyBody(w io.Writer, body io.Reader, max int64) (int64, error) {
	buf := make([]byte, 32<<10)
	var n int64
	for {
		k, err := body.Read(buf)
		if k > 0 {
			if n+int64(k) > max {
				w.Write(buf[:max-n])
				return max, &gates.ExitError{Code: exitTooBig, Err: fmt.Errorf("the response body is over max_response_bytes (%d): cut there", max)}
			}
			w.Write(buf[:k])
			n += int64(k)
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// help is http --help.
func (g *Gate) help() string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s\n\n", g.spec.Usage)
	b.WriteString("Make an HTTP request from the host, as curl would, to a URL the gate's rules\nallow; the body goes to stdout as it arrives.\n\nallowed (methods, URL prefix):\n")
	for _, r := range g.rules {
		fmt.Fprintf(&b, "  %-10s %s\n", strings.Join(r.methods, ","), r.prefix)
	}
	b.WriteString(`
options:
  -X, --request METHOD   the method (default GET; POST with -d)
  -H, --header 'N: v'    a request header ('N:' drops a default one); a header
                         the rules set cannot be set, nor Host, Proxy-*,
                         hop-by-hop ones, Accept-Encoding or Range
  -d, --data DATA        a request body (repeated: joined with &); @- reads it
                         from stdin, without line breaks
  --data-binary DATA     a request body as it is; @- reads it from stdin (a file
                         of the sandbox: --data-binary @- < FILE)
  -i, --include          print the status line and headers first
  -f, --fail             exit 22, printing no body, when the status is >= 400
  -L, --location         follow redirects (at most 5), each to an allowed URL
  -s, -S                 accepted: no progress is ever printed, errors always
  -m, --max-time S       give up after S seconds (exit 124)

exit codes: 0 done (whatever the status, without -f); 2 bad arguments;
6 host not found; 7 cannot connect; 22 status >= 400 with -f; 47 too many
redirects; 56 receiving failed; 60 certificate not trusted; 63 response over
the gate's max_response_bytes; 124 timed out; 126 refused by policy
`)
	return b.String()
}
