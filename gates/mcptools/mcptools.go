// Package mcptools turns the tools of MCP servers into gates: each tool
// becomes a command in the sandbox that takes key=value words (or one JSON
// object, or a JSON object on stdin), checks them against the tool's input
// schema, calls the tool and prints its result.
//
// A server is started (stdio) or connected to (streamable HTTP) when its
// gates are made, since the tool list names the gates, and closed when
// they are (gates.Registry.Close). A stdio server's last 2 KiB of stderr
// are kept and shown when it fails; one that went away (crashed) is
// started again by the next call. Each call has the server's timeout.
//
// # Untrusted servers
//
// What a server says about its tools reaches listings and a model's
// prompt, so it is cleaned or refused first (text.go): property names must
// be plain identifiers, names and schema values may hold no control or
// invisible character (else the tool is refused, see [Refused]),
// descriptions are cleaned and cut, a summary is one line. A server gives
// at most [Server.MaxTools] tools, and what is held of them is bounded
// (input schemas 64 KiB each, 4 MiB together, 16 MiB per message read).
package mcptools

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/gates/secrets"
	"github.com/gatebridge/gatebridge/internal/lossless"
)

// KindMCP is the kind of these gates in `gatebridge gates`.
const KindMCP = "mcp"

// DefaultTimeout bounds one tool call without Server.Timeout.
const DefaultTimeout = 60 * time.Second

// DefaultMaxTools bounds the tools taken from one server without
// Server.MaxTools: each is a wrapper in every session.
const DefaultMaxTools = 256

// What a server's tool list may make us hold: one message (a page of
// tools/list) at most maxFrameBytes while it is decoded, and of the tools
// kept, at most maxListBytes together (as JSON: what the cache holds).
const (
	maxFrameBytes = 16 << 20
	maxListBytes  = maxCacheBytes
)

// Server configures one MCP server.
type Server struct {
	// Name names the server in messages and, by default, prefixes its
	// gates ("NAME_").
	Name string
	// Command starts a stdio server; URL connects to a streamable HTTP
	// one (with Headers, sent to URL's origin only: a redirect to another
	// scheme, host or port is refused). Exactly one must be set.
	Command []string
	// Env is added to a stdio server's environment, which otherwise holds
	// only the variables of gatebridge's own that [BaseEnv] keeps (PATH,
	// HOME, the locale, …) and those EnvPassthrough names: not whatever
	// else gatebridge's environment holds (cloud credentials, tokens).
	Env []string
	// Dir is a stdio server's working directory; "" is gatebridge's.
	// The mcp kind sets "/" for a server on the host when gatebridge's
	// lies where the sandbox writes.
	Dir string
	// EnvPassthrough names more variables of gatebridge's environment to
	// pass to a stdio server, exactly as named.
	EnvPassthrough []string
	URL            string
	Headers        map[string]string
	// Expand, when set, expands the values of Env (when the server
	// starts) and of Headers (with each request): secret references
	// (${secret:NAME}). The tool-list cache is keyed by Env unexpanded.
	Expand func(ctx context.Context, v string) (string, error)
	// Redactor, when set, redacts a stdio server's stderr before its end
	// is cut into an error (the mcp kind sets it with Expand).
	Redactor *secrets.Redactor
	// Tools, when set, are the only tools made into gates: each must be
	// one the server has. The server may list more tools than MaxTools.
	Tools []string
	// MaxTools bounds the tools made into gates; a server that lists more,
	// with no Tools to choose from them, is an error. 0 means
	// DefaultMaxTools.
	MaxTools int
	// Prefix of the gate names; nil means Name + "_".
	Prefix *string
	// Timeout bounds one call; 0 means DefaultTimeout.
	Timeout time.Duration
	// Approval is how calls of the server's tools are approved:
	// gates.ApprovalNever ("" too), gates.ApprovalAsk (every call waits
	// for approval: gates.Approver) or gates.ApprovalDeny (every call is
	// refused). ToolApproval sets it for single tools, by the tool's name.
	Approval     string
	ToolApproval map[string]string
	// Isolator, when set, runs a stdio server in a sandbox of its own
	// ([gates.Isolator]) that reaches what Isolate lists; the sandbox
	// lives as long as the server process. Nil runs it on the host. The
	// mcp kind sets it from [gates.Env.Isolation].
	Isolator gates.Isolator
	Isolate  gates.IsolateSpec
	// CacheDir, when set, keeps a stdio server's tool list there, keyed
	// by its command, environment and program file: the next Connect
	// makes the gates from it without starting the server, which starts
	// at its first call (and then refreshes the entry). An entry is used
	// only if it is a regular file of this user's, writable by no one
	// else, younger than [CacheMaxAge]. "" starts the server at Connect.
	CacheDir string
}

// CacheMaxAge bounds how old a cached tool list may be: a server whose
// program is an interpreter (npx, python3) changes its tools without its
// program file changing.
var CacheMaxAge = 24 * time.Hour

// Refused is a tool that did not become a gate, and why. Tool is the name
// as the server sent it: print it with String.
type Refused struct {
	Tool string
	Err  error
}

// String says which tool was refused and why, on one line: the name quoted
// in ASCII (it may hold anything), the reason never quoting more of what
// the server sent.
func (r Refused) String() string {
	return fmt.Sprintf("tool %s is not a gate: %s", quoteName(r.Tool), oneLine(r.Err.Error(), 500))
}

// SettingError is a setting of a [Server] that its server's tool list
// contradicts (a listed tool it does not have) or overflows. Field names
// the setting as gatebridge's config does: "tools", "max_tools".
type SettingError struct {
	Server string
	Field  string
	Err    error
}

// ErrNoSuchTool is in the SettingError of a tool Server.Tools names that
// the server does not have.
var ErrNoSuchTool = errors.New("the server has no such tool")

func (e *SettingError) Error() string { return fmt.Sprintf("mcp server %s: %v", e.Server, e.Err) }
func (e *SettingError) Unwrap() error { return e.Err }

// client is one server, shared by its gates. A server that went away
// (crashed) is started again by the next call.
type client struct {
	name    string
	dial    func(ctx context.Context) (*mcp.ClientSession, error)
	stderr  *tail // the stdio server's last stderr, shown when it fails
	red     *secrets.Redactor
	mu      sync.Mutex
	session *mcp.ClientSession // nil: not connected
	closed  bool
	// ends holds, per session of an isolated server, a channel closed
	// once its sandbox is cleaned up: closing the session waits for it.
	ends sync.Map
}

// closeSession closes s and waits until the server's sandbox, if it has
// one, is cleaned up.
func (c *client) closeSession(s *mcp.ClientSession) error {
	err := s.Close()
	if end, ok := c.ends.LoadAndDelete(s); ok {
		<-end.(chan struct{})
	}
	return err
}

// get returns the session, connecting again if the last one was lost.
func (c *client) get(ctx context.Context) (*mcp.ClientSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("closed")
	}
	if c.session == nil {
		s, err := c.dial(ctx)
		if err != nil {
			return nil, c.withStderr(err)
		}
		c.session = s
	}
	return c.session, nil
}

// lost drops session s after a call found its connection gone.
func (c *client) lost(s *mcp.ClientSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session == s {
		c.session = nil
		c.closeSession(s)
	}
}

func (c *client) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.session == nil {
		return nil
	}
	err := c.closeSession(c.session)
	c.session = nil
	return err
}

// withStderr adds the server's last stderr lines to err, cleaned (no
// terminal escapes reach whoever reads the error).
func (c *client) withStderr(err error) error {
	if c.stderr == nil {
		return err
	}
	// Redacted before it is cut: the tail's start, where the sandbox
	// puts it with the length of what the server logs after, may split a
	// secret, whose end no later redaction recognizes.
	t, cut := c.stderr.get()
	if cut {
		t = c.red.Tail(t)
	} else {
		t = c.red.String(t)
	}
	if t := cleanText(t, 2048); t != "" {
		return fmt.Errorf("%w; its stderr ends with: %s", err, t)
	}
	return err
}

// untrusted is an error whose text the server may have written (a
// JSON-RPC error message, its stderr): its message is cleaned as a
// description is, for the terminal or log it goes to.
type untrusted struct{ err error }

func (e untrusted) Error() string { return cleanText(e.err.Error(), maxDescriptionBytes) }
func (e untrusted) Unwrap() error { return e.err }

// tail keeps the last bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
	max int
	cut bool // its start was dropped
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
		t.cut = true
	}
	return len(p), nil
}

// get returns what is kept, and whether its start was dropped.
func (t *tail) get() (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf), t.cut
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// GateName is the gate a tool becomes: prefix + tool, every character but
// letters, digits, '_' and '-' replaced by '_'.
func GateName(prefix, tool string) string { return unsafeName.ReplaceAllString(prefix+tool, "_") }

// Connect starts or connects to s and makes a gate of each of its tools
// (of s.Tools when set). Tools whose gate name the wrappers refuse, or that
// clash, are returned as refused, not dropped in silence. The gates close
// the connection when they are closed.
func Connect(ctx context.Context, s Server) ([]gates.Gate, []Refused, error) {
	if (len(s.Command) == 0) == (s.URL == "") {
		return nil, nil, fmt.Errorf("mcp server %s: set command or url (one of them)", s.Name)
	}
	if n, max := len(allowSet(s.Tools)), maxTools(s); n > max {
		return nil, nil, &SettingError{Server: s.Name, Field: "max_tools", Err: fmt.Errorf("%d tools are listed, more than the %d allowed", n, max)}
	}
	c := &client{name: s.Name, red: s.Redactor}
	if len(s.Command) > 0 {
		c.stderr = &tail{max: 2048}
	}
	c.dial = func(ctx context.Context) (*mcp.ClientSession, error) {
		var t mcp.Transport
		if len(s.Command) > 0 {
			env, err := expandAll(ctx, s.Expand, s.Env)
			if err != nil {
				return nil, err
			}
			cmd := exec.Command(s.Command[0], s.Command[1:]...)
			cmd.Env = append(BaseEnv(os.Environ(), s.EnvPassthrough), env...)
			cmd.Stderr = c.stderr
			cmd.Dir = s.Dir
			if s.Isolator != nil {
				return c.connectIsolated(ctx, s.Isolator, s.Isolate, cmd, &mcp.CommandTransport{Command: cmd})
			}
			t = &mcp.CommandTransport{Command: cmd}
		} else {
			hc, err := httpClient(s.URL, s.Headers, s.Expand)
			if err != nil {
				return nil, err
			}
			t = &mcp.StreamableClientTransport{Endpoint: s.URL, HTTPClient: hc, MaxRetries: -1, MaxEventSize: maxFrameBytes}
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return mcp.NewClient(&mcp.Implementation{Name: "gatebridge"}, nil).Connect(cctx, t, nil)
	}
	cache := cachePath(s)
	if cache != "" {
		dial := c.dial
		c.dial = func(ctx context.Context) (*mcp.ClientSession, error) {
			session, err := dial(ctx)
			if err == nil {
				// Started for a call: keep the cached list current.
				go func() {
					lctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					if tools, err := listTools(lctx, session, s); err == nil {
						writeCache(cache, tools)
					}
				}()
			}
			return session, err
		}
		if tools, ok := readCache(cache); ok {
			if out, refused, err := makeGates(c, s, tools); err == nil {
				return out, refused, nil
			}
			// The list is older than the config (it lacks a tool the
			// config names): ask the server itself.
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	session, err := c.get(cctx)
	if err != nil {
		return nil, nil, fmt.Errorf("mcp server %s: connect: %w", s.Name, untrusted{err})
	}
	tools, err := listTools(cctx, session, s)
	if err != nil {
		c.close()
		if se := (*SettingError)(nil); errors.As(err, &se) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("mcp server %s: list tools: %w", s.Name, untrusted{err})
	}
	out, refused, err := makeGates(c, s, tools)
	if err != nil {
		c.close()
		return nil, nil, err
	}
	if cache != "" {
		writeCache(cache, tools)
	}
	return out, refused, nil
}

// connectIsolated starts the server of cmd (t's) through iso and
// connects to it, on a goroutine locked to its OS thread that stays with
// the server until the session ends (the server is tied to that thread;
// see [gates.Isolator]), then cleans up and ends, discarding the thread.
// Closing the session through c waits for that cleanup.
func (c *client) connectIsolated(ctx context.Context, iso gates.Isolator, spec gates.IsolateSpec, cmd *exec.Cmd, t *mcp.CommandTransport) (*mcp.ClientSession, error) {
	type result struct {
		s   *mcp.ClientSession
		err error
	}
	ch := make(chan result, 1)
	end := make(chan struct{})
	go func() {
		defer close(end)
		runtime.LockOSThread() // never unlocked: the thread ends with the server
		cleanup, err := iso.Isolate(ctx, cmd, spec)
		if err != nil {
			ch <- result{nil, err}
			return
		}
		defer cleanup()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		s, err := mcp.NewClient(&mcp.Implementation{Name: "gatebridge"}, nil).Connect(cctx, t, nil)
		cancel()
		ch <- result{s, err}
		if err != nil {
			// The SDK closes (and waits for) the server on most failures;
			// make sure of it (a second Wait only returns an error).
			if cmd.Process != nil {
				cmd.Process.Kill()
				cmd.Wait()
			}
			return
		}
		// Until the session is closed, which closes the server's stdin
		// and waits for it (killing it if it lingers), or the server ends.
		s.Wait()
	}()
	r := <-ch
	if r.err == nil {
		c.ends.Store(r.s, end)
	}
	return r.s, r.err
}

// listTools reads the server's tool list, page by page, and keeps what
// the gates need of each tool s asks for (all, or those s.Tools names):
// more than s's MaxTools of them, or more than maxListBytes, is an error,
// found without reading further. The tools s.Tools does not name are not
// held.
func listTools(ctx context.Context, session *mcp.ClientSession, s Server) ([]*mcp.Tool, error) {
	allow, max := allowSet(s.Tools), maxTools(s)
	var tools []*mcp.Tool
	held := 0
	for tool, err := range session.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		if tool == nil || allow != nil && !allow[tool.Name] {
			continue
		}
		if len(tools) == max {
			return nil, tooMany(s, max)
		}
		kept := keep(tool)
		b, err := json.Marshal(kept)
		if err != nil {
			return nil, fmt.Errorf("tool %s: %v", quoteName(tool.Name), err)
		}
		if held += len(b); held > maxListBytes {
			return nil, &SettingError{Server: s.Name, Field: "tools", Err: fmt.Errorf("its tools come to more than %d bytes (names, descriptions, schemas)", maxListBytes)}
		}
		tools = append(tools, kept)
	}
	return tools, nil
}

// keep is what a gate needs of tool: its name, title, description (cut:
// what is shown is cut further once cleaned) and input schema (as JSON).
// Its output schema, annotations and the rest are not held.
func keep(tool *mcp.Tool) *mcp.Tool {
	k := &mcp.Tool{Name: tool.Name, Title: tool.Title, Description: tool.Description}
	if len(k.Name) > maxToolNameBytes {
		k.Name = k.Name[:maxToolNameBytes+1] // refused for its length
	}
	k.Title = cut(k.Title, 4*maxSummaryBytes)
	k.Description = cut(k.Description, 4*maxDescriptionBytes)
	if tool.InputSchema != nil {
		if b, err := json.Marshal(tool.InputSchema); err == nil {
			k.InputSchema = json.RawMessage(b)
		} else {
			k.InputSchema = json.RawMessage(`"not JSON"`) // refused by newGate
		}
	}
	return k
}

func allowSet(names []string) map[string]bool {
	if len(names) == 0 {
		return nil
	}
	allow := map[string]bool{}
	for _, n := range names {
		allow[n] = true
	}
	return allow
}

func maxTools(s Server) int {
	if s.MaxTools > 0 {
		return s.MaxTools
	}
	return DefaultMaxTools
}

func tooMany(s Server, max int) error {
	return &SettingError{Server: s.Name, Field: "max_tools", Err: fmt.Errorf("the server lists more than %d tools", max)}
}

// makeGates makes the gates of s's tools, sharing client c (closed when no
// gate uses it). A tool s.Tools names that the server does not have is an
// error (the caller closes c).
func makeGates(c *client, s Server, tools []*mcp.Tool) ([]gates.Gate, []Refused, error) {
	prefix := s.Name + "_"
	if s.Prefix != nil {
		prefix = *s.Prefix
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	// The allowlist is only read: a tool passes when it names it, never
	// because it has run out of names.
	allow := allowSet(s.Tools)
	if allow == nil && len(tools) > maxTools(s) { // a cached list
		return nil, nil, tooMany(s, maxTools(s))
	}
	found := map[string]bool{}
	var out []gates.Gate
	var refused []Refused
	seen := map[string]string{}
	sort.Slice(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name })
	for _, tool := range tools {
		if allow != nil && !allow[tool.Name] {
			continue
		}
		found[tool.Name] = true
		g, err := newGate(c, tool, GateName(prefix, tool.Name), timeout)
		if g != nil {
			g.approval = cmp.Or(s.ToolApproval[tool.Name], s.Approval, gates.ApprovalNever)
		}
		if err == nil {
			if other, dup := seen[g.spec.Name]; dup {
				err = fmt.Errorf("gate name %s is also tool %s's", g.spec.Name, quoteName(other))
			}
		}
		if err != nil {
			refused = append(refused, Refused{Tool: tool.Name, Err: err})
			continue
		}
		seen[g.spec.Name] = tool.Name
		out = append(out, g)
	}
	var missing []string
	for n := range allow {
		if !found[n] {
			missing = append(missing, strconv.Quote(n))
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, nil, &SettingError{Server: s.Name, Field: "tools",
			Err: fmt.Errorf("%w: %s", ErrNoSuchTool, strings.Join(missing, ", "))}
	}
	if len(out) == 0 {
		c.close()
	}
	return out, refused, nil
}

// maxCacheBytes caps a cached tool list.
const maxCacheBytes = 4 << 20

// cachePath is the cache entry of stdio server s: its command, env, tools
// allowlist (the entry holds only those tools) and program file (path,
// size, mtime, inode) hashed. "" when s has no cache or its program cannot
// be stat'ed.
func cachePath(s Server) string {
	if s.CacheDir == "" || len(s.Command) == 0 {
		return ""
	}
	fi, err := os.Stat(s.Command[0])
	if err != nil {
		return ""
	}
	var ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = uint64(st.Ino)
	}
	key, _ := json.Marshal(struct {
		Command, Env, Tools []string
		Size                int64
		Mtime               int64
		Ino                 uint64
		Passthrough         []string `json:",omitempty"`
	}{s.Command, s.Env, s.Tools, fi.Size(), fi.ModTime().UnixNano(), ino, s.EnvPassthrough})
	sum := sha256.Sum256(key)
	return filepath.Join(s.CacheDir, hex.EncodeToString(sum[:16])+".json")
}

// readCache reads a cached tool list: a regular file (never a link) of
// ours, writable by no one else, fresh, capped.
func readCache(path string) ([]*mcp.Tool, bool) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o022 != 0 || fi.Size() > maxCacheBytes ||
		time.Since(fi.ModTime()) > CacheMaxAge {
		return nil, false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() || st.Nlink != 1 {
		return nil, false
	}
	var tools []*mcp.Tool
	if err := json.NewDecoder(io.LimitReader(f, maxCacheBytes)).Decode(&tools); err != nil || len(tools) == 0 {
		return nil, false
	}
	for _, t := range tools {
		if t == nil || t.Name == "" {
			return nil, false
		}
	}
	return tools, true
}

// writeCache writes a tool list, 0600 in a 0700 directory, atomically; a
// failure only costs the next Connect a server start.
func writeCache(path string, tools []*mcp.Tool) {
	b, err := json.Marshal(tools)
	if err != nil || len(b) > maxCacheBytes {
		return
	}
	dir := filepath.Dir(path)
	if os.MkdirAll(dir, 0o700) != nil {
		return
	}
	tmp, err := os.CreateTemp(dir, ".tools-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(b)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil || os.Rename(tmp.Name(), path) != nil {
		os.Remove(tmp.Name())
	}
}

// httpClient is the client of the streamable HTTP server at endpoint,
// which sends headers (mcp.servers.NAME.headers: credentials, say) to
// endpoint's origin only (scheme, host and port), and follows a redirect
// only within that origin.
//
// The headers were added to every request, and a client follows
// redirects: a hostile or compromised server answered 307 with another
// host (or http:// for an https:// server) and the Authorization header
// went there, or over the network in clear text. A redirect to another
// origin now fails the request with an error naming both origins: the
// configured URL is the one to fix. (Stripping the headers instead would
// only hide the move, and the request would fail anyway.) The headers are
// also set per request only for the endpoint's origin, whatever asked for
// the request.
func httpClient(endpoint string, headers map[string]string, expand func(context.Context, string) (string, error)) (*http.Client, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("url %q is not an absolute http or https URL", endpoint)
	}
	home := originOf(u)
	return &http.Client{
		Transport: headerTransport{origin: home, headers: headers, expand: expand, base: http.DefaultTransport},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if o := originOf(req.URL); o != home {
				return &redirectError{from: home, to: o}
			}
			if len(via) >= maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			return nil
		},
	}, nil
}

// maxRedirects bounds the redirects followed within a server's origin.
const maxRedirects = 10

// originOf is u's origin: scheme, lower-case host and port (the scheme's
// default port when u names none).
func originOf(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// redirectError is a redirect refused because it leaves the server's
// origin. to is the server's word: cleaned (see cleanText) when printed.
type redirectError struct{ from, to string }

func (e *redirectError) Error() string {
	msg := fmt.Sprintf("the server redirected from %s to another origin, %s: refused (its headers go to %s only)", e.from, cleanText(e.to, 256), e.from)
	if strings.HasPrefix(e.from, "https:") && strings.HasPrefix(e.to, "http:") {
		msg += "; and from https to plain http"
	}
	return msg
}

// headerTransport adds headers to the requests for origin.
type headerTransport struct {
	origin  string
	headers map[string]string
	expand  func(ctx context.Context, v string) (string, error) // nil: as they are
	base    http.RoundTripper
}

// expandAll expands each value of list with expand (nil: list itself).
func expandAll(ctx context.Context, expand func(context.Context, string) (string, error), list []string) ([]string, error) {
	if expand == nil {
		return list, nil
	}
	out := make([]string, len(list))
	for i, v := range list {
		var err error
		if out[i], err = expand(ctx, v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// RoundTrip sends r, with the headers (their secrets expanded) when r
// goes to the origin; a response that is one message (not an event
// stream, whose events the SDK bounds) is cut off past maxFrameBytes: the
// SDK reads it whole.
func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.headers) > 0 && originOf(r.URL) == h.origin {
		r = r.Clone(r.Context())
		for k, v := range h.headers {
			if h.expand != nil {
				var err error
				if v, err = h.expand(r.Context(), v); err != nil {
					return nil, err
				}
			}
			r.Header.Set(k, v)
		}
	}
	resp, err := h.base.RoundTrip(r)
	if err == nil && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = &cappedBody{rc: resp.Body, left: maxFrameBytes}
	}
	return resp, err
}

// cappedBody fails a read past its bytes.
type cappedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	if b.left -= int64(n); b.left < 0 {
		return 0, fmt.Errorf("the server sent a message over %d bytes", maxFrameBytes)
	}
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }

// gate is one tool.
type gate struct {
	c        *client
	tool     string          // its name, as the server spells it
	desc     string          // its description, cleaned (--help)
	schema   json.RawMessage // cleaned (see cleanSchema)
	props    map[string]prop
	spec     gates.Spec
	timeout  time.Duration
	approval string // gates.ApprovalNever, ApprovalAsk or ApprovalDeny
}

// prop is what the conversion of key=value needs of a property.
type prop struct {
	typ      string // "string", "integer", "number", "boolean", "object", "array", "" (any)
	required bool
}

// newGate makes the gate name of tool. Everything the server wrote that
// the gate shows is cleaned (text.go); a tool whose name or schema would
// have to change to be safe is refused.
func newGate(c *client, tool *mcp.Tool, name string, timeout time.Duration) (*gate, error) {
	if len(tool.Name) > maxToolNameBytes {
		return nil, fmt.Errorf("its name is over %d bytes", maxToolNameBytes)
	}
	if hasHidden(tool.Name) {
		return nil, errors.New("its name has hidden or control characters")
	}
	if err := mailbox.ValidateName(name); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(tool.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("its input schema: %v", err)
	}
	if string(raw) == "null" {
		raw = []byte(`{"type":"object"}`)
	}
	schema, err := cleanSchema(raw)
	if err != nil {
		return nil, err
	}
	params, err := gates.ParamsOfSchema(schema)
	if err != nil {
		return nil, err
	}
	for i := range params {
		params[i].Description = oneLine(params[i].Description, maxSummaryBytes)
	}
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	json.Unmarshal(schema, &s)
	props := map[string]prop{}
	for n, p := range s.Properties {
		t, _ := p.Type.(string)
		if ts, ok := p.Type.([]any); ok { // ["integer", "null"]: the first non-null
			for _, x := range ts {
				if x, _ := x.(string); x != "null" && t == "" {
					t = x
				}
			}
		}
		if !knownType[t] {
			t = "" // any: what typeOK and --help know nothing of
		}
		props[n] = prop{typ: t}
	}
	for _, r := range s.Required {
		p := props[r]
		p.required = true
		props[r] = p
	}
	desc := cleanText(tool.Description, maxDescriptionBytes)
	summary := firstLine(desc)
	if summary == "" {
		summary = firstLine(tool.Title)
	}
	usage := name + " [KEY=VALUE...] | " + name + " '{JSON}' | " + name + " < JSON"
	if len(params) > 0 {
		var b strings.Builder
		b.WriteString(name)
		for _, p := range params {
			if p.Required {
				fmt.Fprintf(&b, " %s=…", p.Name)
			} else {
				fmt.Fprintf(&b, " [%s=…]", p.Name)
			}
		}
		usage = b.String()
	}
	return &gate{c: c, tool: tool.Name, desc: desc, schema: schema, props: props, timeout: timeout,
		// RawArgs: the gate reads a JSON object argument itself, typed by
		// the tool's schema (arguments).
		spec: gates.Spec{Name: name, Summary: summary, Usage: usage, Params: params, Stdin: gates.StdinIfNoArgs, Timeout: timeout, RawArgs: true}}, nil
}

// knownType are the JSON Schema types a key=value word converts to.
var knownType = map[string]bool{"string": true, "integer": true, "number": true, "boolean": true, "object": true, "array": true}

func (g *gate) Spec() gates.Spec { return g.spec }

// OwnsHelp implements gates.HelpOwner: --help prints the server's own
// description of the tool and its typed parameters (help).
func (g *gate) OwnsHelp(string) bool { return true }

var (
	_ gates.Approver       = (*gate)(nil)
	_ gates.ApprovalSetter = (*gate)(nil)
)

// NeedsApproval implements gates.Approver.
func (g *gate) NeedsApproval() bool { return g.approval == gates.ApprovalAsk }

// ApprovalSetting implements gates.ApprovalSetter.
func (g *gate) ApprovalSetting() string { return g.approval }

// InputSchema implements gates.Schemer.
func (g *gate) InputSchema() json.RawMessage { return g.schema }

// Close implements gates.Closer: the server's connection closes with the
// first of its gates to close (a registry closes them all).
func (g *gate) Close() error { return g.c.close() }

// Call converts the arguments, calls the tool and prints its result.
func (g *gate) Call(ctx context.Context, c *gates.Call) (int, error) {
	if g.approval == gates.ApprovalDeny {
		// refused here too, whatever front end forgot to ask
		return gates.ExitDenied, gates.Deniedf("%s: refused by its config (approval: deny)", g.spec.Name)
	}
	if len(c.Args) == 1 && (c.Args[0] == "--help" || c.Args[0] == "-h") {
		g.help(c)
		return gates.ExitOK, nil
	}
	args, err := g.arguments(c.Args, c.Stdin)
	if err != nil {
		return gates.ExitUsage, gates.Usagef("%s: %v (see %s --help)", g.spec.Name, err, g.spec.Name)
	}
	// Starting a server again has its own limit (30s); the tool's timeout
	// is for the call.
	session, err := g.c.get(ctx)
	if err != nil {
		return gates.ExitFailure, fmt.Errorf("%s: mcp server %s could not be started again: %v", g.spec.Name, g.c.name, err)
	}
	cctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	res, err := session.CallTool(cctx, &mcp.CallToolParams{Name: g.tool, Arguments: args})
	if err != nil {
		switch {
		case ctx.Err() != nil: // the caller went away, the run ended
			return gates.ExitTimeout, ctx.Err()
		case cctx.Err() != nil:
			return gates.ExitTimeout, &gates.ExitError{Code: gates.ExitTimeout,
				Err: fmt.Errorf("%s: mcp server %s did not answer within %v", g.spec.Name, g.c.name, g.timeout)}
		case errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			g.c.lost(session) // waits for a stdio server to be gone: its stderr is complete
			return gates.ExitFailure, g.c.withStderr(fmt.Errorf("%s: mcp server %s went away (it is started again by the next call): %v", g.spec.Name, g.c.name, err))
		}
		return gates.ExitFailure, fmt.Errorf("%s: mcp server %s: %v", g.spec.Name, g.c.name, err)
	}
	w := c.Stdout
	if res.IsError {
		w = c.Stderr
	}
	printed := false
	for _, ct := range res.Content {
		switch ct := ct.(type) {
		case *mcp.TextContent:
			fmt.Fprint(w, ct.Text)
			if !strings.HasSuffix(ct.Text, "\n") {
				fmt.Fprintln(w)
			}
			printed = true
		case *mcp.ImageContent:
			fmt.Fprintf(w, "[image %s, %d bytes: not shown]\n", ct.MIMEType, len(ct.Data))
		case *mcp.AudioContent:
			fmt.Fprintf(w, "[audio %s, %d bytes: not shown]\n", ct.MIMEType, len(ct.Data))
		default:
			b, _ := json.Marshal(ct)
			fmt.Fprintf(w, "%s\n", b)
		}
	}
	if !printed && res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		fmt.Fprintf(w, "%s\n", b)
	}
	if res.IsError {
		return gates.ExitFailure, nil
	}
	return gates.ExitOK, nil
}

// arguments builds the tool's arguments: key=value words converted by the
// schema, or one JSON object argument, or (no arguments) a JSON object on
// stdin; then checks required parameters and types.
func (g *gate) arguments(words []string, stdin []byte) (map[string]any, error) {
	args := map[string]any{}
	switch {
	case len(words) == 0 && len(strings.TrimSpace(string(stdin))) > 0:
		if err := json.Unmarshal(stdin, &args); err != nil {
			return nil, fmt.Errorf("stdin is not a JSON object: %v", err)
		}
	case len(words) == 1 && strings.HasPrefix(strings.TrimSpace(words[0]), "{"):
		if err := json.Unmarshal([]byte(words[0]), &args); err != nil {
			return nil, fmt.Errorf("the argument is not a JSON object: %v", err)
		}
	default:
		for _, w := range words {
			k, v, ok := strings.Cut(w, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("%q is not KEY=VALUE", w)
			}
			p, known := g.props[k]
			if !known && len(g.props) > 0 {
				return nil, fmt.Errorf("unknown parameter %s (parameters: %s)", lossless.QuoteCap(k, 64), strings.Join(g.names(), ", "))
			}
			val, err := convert(p.typ, v)
			if err != nil {
				return nil, fmt.Errorf("parameter %s: %v", k, err)
			}
			args[k] = val
		}
	}
	for _, n := range g.names() {
		p := g.props[n]
		v, ok := args[n]
		if !ok {
			if p.required {
				return nil, fmt.Errorf("missing required parameter %s", n)
			}
			continue
		}
		if !typeOK(p.typ, v) {
			return nil, fmt.Errorf("parameter %s: want %s, got %T", n, p.typ, v)
		}
	}
	return args, nil
}

func (g *gate) names() []string {
	out := make([]string, 0, len(g.props))
	for n := range g.props {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// convert turns a key=value value into the schema's type: numbers,
// integers and booleans parsed, objects and arrays as JSON, strings (and
// untyped values) kept as written, so an id like 00123 stays a string.
func convert(typ, v string) (any, error) {
	switch typ {
	case "integer", "number", "boolean", "object", "array":
		var x any
		dec := json.NewDecoder(strings.NewReader(v))
		dec.UseNumber()
		if err := dec.Decode(&x); err != nil || dec.More() {
			return nil, fmt.Errorf("%q is not a JSON %s", v, typ)
		}
		if !typeOK(typ, x) {
			return nil, fmt.Errorf("%q is not %s", v, article(typ))
		}
		return x, nil
	}
	return v, nil
}

func typeOK(typ string, v any) bool {
	switch typ {
	case "string":
		_, ok := v.(string)
		return ok
	case "integer":
		switch n := v.(type) {
		case json.Number:
			_, err := n.Int64()
			return err == nil
		case float64:
			return n == float64(int64(n))
		}
		return false
	case "number":
		switch v.(type) {
		case json.Number, float64:
			return true
		}
		return false
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	}
	return true
}

func article(typ string) string {
	if typ == "integer" || typ == "object" || typ == "array" {
		return "an " + typ
	}
	return "a " + typ
}

// help prints the tool's description and parameters.
func (g *gate) help(c *gates.Call) {
	fmt.Fprintf(c.Stdout, "usage: %s\n", g.spec.Usage)
	if g.desc != "" {
		// The server's own text, indented: the lines at the margin are ours.
		fmt.Fprintf(c.Stdout, "\n  %s\n", strings.ReplaceAll(g.desc, "\n", "\n  "))
	}
	if len(g.spec.Params) > 0 {
		fmt.Fprintln(c.Stdout, "\nparameters:")
		for _, p := range g.spec.Params {
			req := ""
			if p.Required {
				req = " (required)"
			}
			typ := g.props[p.Name].typ
			if typ == "" {
				typ = "any"
			}
			fmt.Fprintf(c.Stdout, "  %s: %s%s  %s\n", p.Name, typ, req, p.Description)
		}
	}
	fmt.Fprintf(c.Stdout, "\nArguments: KEY=VALUE words, or one JSON object, or a JSON object on stdin.\n")
}

// baseEnvNames are the variables of gatebridge's environment every stdio
// server gets: where programs are, who and where the user is, the locale
// and terminal. Nothing that commonly holds a credential.
var baseEnvNames = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR",
	"XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR"}

// BaseEnv returns the entries of environ (KEY=VALUE) a stdio MCP server
// inherits: those named in baseEnvNames, LC_*, and those passthrough
// names. Everything else of gatebridge's environment (AWS_*, GITHUB_TOKEN
// when no secret took it, …) stays out.
func BaseEnv(environ, passthrough []string) []string {
	var out []string
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		if slices.Contains(baseEnvNames, k) || strings.HasPrefix(k, "LC_") || slices.Contains(passthrough, k) {
			out = append(out, kv)
		}
	}
	return out
}

// ValidEnvName reports whether name can be a variable of env_passthrough.
func ValidEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
