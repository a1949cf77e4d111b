package main

import (
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/internal/hint"
	"github.com/gatebridge/gatebridge/internal/lossless"
	"github.com/gatebridge/gatebridge/sandbox"
)

func newMCPCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp [--http ADDR --token-file FILE]",
		Short: "Serve MCP on stdio: one bash tool that runs in a sandbox with every gate on its PATH",
		Long: `Serve the Model Context Protocol on stdin and stdout with one tool, bash:
it runs a command line in a sandbox (one per MCP session: files persist
between calls, shell state does not) where every gate is a command. The
tool's description lists the gates, so a model needs nothing else.

The sandbox is opened when the server starts, so a backend that cannot
run here fails at once. Everything is stopped and removed when the client
disconnects.

--http ADDR serves streamable HTTP instead, one sandbox per MCP session
(at most mcp.sessions.max_sandboxes at once; one idle for
mcp.sessions.idle_timeout is closed). --token-file is required, on
loopback too: anyone who reaches the port would run commands as you.
Clients send Authorization: Bearer TOKEN.`,
		Example: `  gatebridge mcp --sandbox bwrap --workspace ~/src/project
  gatebridge mcp --sandbox docker --writable-workspace
  gatebridge mcp --http 127.0.0.1:8765 --token-file ~/.config/gatebridge/token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.mcp(cmd) },
	}
	f := cmd.Flags()
	f.String("sandbox", autoBackend, "sandbox backend: "+backendChoices(a.backends))
	f.String("workspace", "", "directory the commands start in and the gates see (default: current directory)")
	f.Bool("writable-workspace", false, "let the sandbox write the workspace (bwrap, docker)")
	f.String("image", "", "docker image (docker backend; config sandbox.docker.image)")
	f.String("runtime", "", "OCI runtime of the docker engine, e.g. runsc (docker backend; config sandbox.docker.runtime)")
	f.Duration("timeout", 0, "default time limit of one bash call (config sandbox.timeout, 10m)")
	f.String("http", "", "serve streamable HTTP on ADDR (host:port) instead of stdio: one sandbox per MCP session")
	f.String("token-file", "", "with --http (required): clients must send 'Authorization: Bearer TOKEN', TOKEN read from this file (at least 32 bytes: openssl rand -hex 32)")
	return needsConfig(cmd)
}

// checkMCPFlags checks --http and --token-file together, before anything
// is opened.
func checkMCPFlags(addr, tokenFile string) error {
	usage := func(msg, hint string) error { return &usageError{withHint(errors.New("mcp: "+msg), hint)} }
	switch {
	case addr == "" && tokenFile != "":
		return usage("--token-file needs --http", "stdio needs no token: the client started this process")
	case addr == "":
		return nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return usage(fmt.Sprintf("--http %q: %v", addr, err), "give host:port, e.g. 127.0.0.1:8765")
	}
	if tokenFile == "" {
		// On loopback too: every local user reaches a loopback port, and
		// would drive the gates and the sandbox as the invoker.
		return usage("--http needs --token-file: anyone who reaches "+addr+" could run commands as you",
			"put a random token in a file only you can read (openssl rand -hex 32 > token; chmod 600 token); clients send Authorization: Bearer TOKEN")
	}
	return nil
}

// mcp serves MCP on stdio, or on streamable HTTP with --http.
func (a *app) mcp(cmd *cobra.Command) error {
	addr, _ := cmd.Flags().GetString("http")
	tokenFile, _ := cmd.Flags().GetString("token-file")
	if err := checkMCPFlags(addr, tokenFile); err != nil {
		return err
	}
	cfg := a.cfg
	workspace, err := resolveWorkspace(cfg.Sandbox.Workspace)
	if err != nil {
		return err
	}
	opts, closeAudit, err := a.rpcOptions(cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer closeAudit()
	if addr != "" {
		// A sandbox that could read the token could connect as a client:
		// neither its workspace nor a directory its gates read may hold it.
		places := append(reachableOf(cfg), reachable{"sandbox.workspace", workspace})
		if err := guardSecrets(&opts, places, []secretFile{{"--token-file", tokenFile}}); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	set := mcpSettings{
		Backend: cfg.Sandbox.Backend, Workspace: workspace, Writable: cfg.Sandbox.WritableWorkspace,
		Timeout: cfg.Sandbox.Timeout, MaxOutput: cfg.Sandbox.MaxOutput,
		MaxBackground: cfg.MCP.Sessions.MaxBackground, MaxBackgroundBytes: cfg.MCP.Sessions.MaxBackgroundBytes,
	}
	srv := rpc.NewServer(mcpProtocolOptions(opts))
	if addr != "" {
		return serveMCPHTTP(ctx, srv, set, mcpHTTP{Addr: addr, TokenFile: tokenFile,
			MaxSandboxes: cfg.MCP.Sessions.MaxSandboxes, IdleTimeout: cfg.MCP.Sessions.IdleTimeout}, cmd.ErrOrStderr())
	}
	h, err := newMCPHost(ctx, srv, set, nil)
	if err != nil {
		return err
	}
	defer h.close()
	return h.server.Run(ctx, &mcp.StdioTransport{})
}

// mcpHTTP configures `gatebridge mcp --http`.
type mcpHTTP struct {
	Addr         string        // host:port
	TokenFile    string        // required: the bearer token
	MaxSandboxes int           // sandboxes open at once; 0: defaultMCPMaxSandboxes
	IdleTimeout  time.Duration // a sandbox with no call for this long is closed; 0: defaultMCPIdleTimeout
}

// serveMCPHTTP serves streamable HTTP: each MCP session gets its own host
// (an in-process connection and its sandbox) at its first tool call, at
// most MaxSandboxes at once, closed when the session ends, after
// IdleTimeout without a call, or when the server stops. Every request
// needs the bearer token of TokenFile, on loopback too.
func serveMCPHTTP(ctx context.Context, srv *rpc.Server, set mcpSettings, hc mcpHTTP, stderr io.Writer) error {
	if err := checkMCPFlags(hc.Addr, hc.TokenFile); err != nil {
		return err
	}
	token, err := loadToken("mcp", hc.TokenFile)
	if err != nil {
		return err
	}
	// One probe host at start: a backend that cannot run fails now, and
	// its gates describe the tool. Each session then gets its own host at
	// its first call (the SDK may ask for a server for any request, so
	// nothing costly is made there), closed when the session ends.
	probe, err := newMCPHost(ctx, srv, set, nil)
	if err != nil {
		return err
	}
	description := probe.description
	probe.close()
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, "gatebridge: mcp: "+format+"\n", args...) }
	pool := newMCPSandboxes(ctx, func(ctx context.Context) (*mcpHost, error) { return newMCPHost(ctx, srv, set, nil) },
		hc.MaxSandboxes, hc.IdleTimeout, logf)
	defer pool.close()
	server := newMCPServer(description, nil, pool.resolve)
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{SessionTimeout: time.Hour})
	ln, err := net.Listen("tcp", hc.Addr)
	if err != nil {
		return fmt.Errorf("mcp: listen on %s: %w", hc.Addr, err)
	}
	if host, _, _ := net.SplitHostPort(hc.Addr); !isLoopbackHost(host) {
		fmt.Fprintf(stderr, "gatebridge: warning: mcp: %s is not a loopback address and this is plain HTTP: the token and everything else travel in clear text (put a TLS proxy in front, or listen on loopback)\n", hc.Addr)
	}
	logf("serving streamable HTTP on http://%s/", ln.Addr())
	// Until a connection has shown the token it is bounded as serve
	// --listen's are (a pool of pending connections, where a new one
	// closes the oldest idle one), it has ReadHeaderTimeout to send its
	// first request, and a 401 closes it: a local user cannot hold
	// connections (the server's file descriptors) without the token.
	hs := &http.Server{Handler: bearer(token, handler),
		ReadHeaderTimeout: mcpHeaderTimeout, IdleTimeout: mcpIdleConnTimeout,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, authConnKey{}, c)
		}}
	ln = &authListener{Listener: ln, pending: rpc.NewPendingConns(0, 0)}
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

// Timeouts of mcp --http's connections: to send a request's headers, and
// to send the next request on a connection kept alive.
const (
	mcpHeaderTimeout   = 10 * time.Second
	mcpIdleConnTimeout = 2 * time.Minute
)

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
// (rpc.PendingConns) until a request on it shows the token.
type authListener struct {
	net.Listener
	pending *rpc.PendingConns
}

func (l *authListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	c := &authConn{Conn: nc, pool: l.pending}
	c.p = l.pending.Add(nc, func() { nc.Close() })
	return c, nil
}

// authConn is a connection of authListener.
type authConn struct {
	net.Conn
	pool *rpc.PendingConns
	p    *rpc.Pending
	once sync.Once
}

// leavePool takes c out of the pending pool (authenticated, or closed).
func (c *authConn) leavePool() { c.once.Do(func() { c.pool.Remove(c.p) }) }

func (c *authConn) Close() error {
	c.leavePool()
	return c.Conn.Close()
}

// mcpProtocolOptions are the options of the protocol server under the
// MCP hosts. They take every process's output from process/output and
// never ask for it again, while the protocol layer keeps each process's
// output for process/read and snapshots, and its last DefaultKeepExited
// (64) exited processes: 1.5 MiB each by default, for nothing.
func mcpProtocolOptions(opts rpc.Options) rpc.Options {
	opts.MaxReplayBytes, opts.MaxRetainedBytes = 4<<10, 4<<10
	return opts
}

// Defaults of the mcp.sessions keys.
const (
	defaultMCPMaxSandboxes       = 4
	defaultMCPIdleTimeout        = 10 * time.Minute
	defaultMCPMaxBackground      = 16
	defaultMCPMaxBackgroundBytes = 16 << 20
)

// mcpSettings configure the MCP server's sandbox and its bash tool.
type mcpSettings struct {
	Backend   string // "auto", "local", "bwrap", "docker"
	Workspace string
	Writable  bool
	Timeout   time.Duration // per call without timeout_ms; 0: none
	MaxOutput int64         // bytes kept per stream (head and tail); 0: 1 MiB
	// Background processes kept (running, or exited and unread), and the
	// output bytes they hold in all; 0: the defaults (mcp.sessions.*).
	MaxBackground      int
	MaxBackgroundBytes int64
}

// mcpHost is an MCP server whose bash tool runs commands through an
// in-process protocol connection: the same sandboxes, gates, limits and
// cleanup as `gatebridge serve`.
type mcpHost struct {
	server *mcp.Server
	client *rpc.Client
	served <-chan error
	set    mcpSettings
	open   rpc.SandboxOpenResult

	description string

	// mu guards the calls and all their state.
	mu      sync.Mutex
	n       int                 // process ids issued (bash-1 … bash-n)
	procs   map[string]*mcpCall // calls in flight, and background processes kept
	bgBytes int64               // output bytes the background ones hold
	evicted map[string]string   // background processes forgotten unread: why
	evictQ  []string            // evicted's keys, oldest first
	// A host that replaces a sandbox closed idle (mcp --http) goes on with
	// its ids: ids up to first were that sandbox's, and gone says what
	// became of them.
	first int
	gone  string

	closeOnce sync.Once
}

// maxEvictedIDs bounds the ids of evicted processes a host remembers (to
// say "evicted" rather than "unknown").
const maxEvictedIDs = 1024

// mcpCall is one bash call in flight, or a background process kept. Its
// fields are guarded by the host's mu.
type mcpCall struct {
	seq            int
	stdout, stderr *sandbox.Capture
	exited         chan rpc.ProcessExitedParams
	progress       chan string // best effort: dropped when the client is slow; nil when closed

	// A background process: its output since the last bash_output, its
	// exit once known, and a channel closed at each change.
	bg      bool
	exit    *rpc.ProcessExitedParams
	changed chan struct{}
	// Output bytes not kept because the session's background output was at
	// mcp.sessions.max_background_bytes: stdout, stderr.
	unkept [2]int64
}

func (c *mcpCall) changedLocked() {
	if c.changed != nil {
		close(c.changed)
		c.changed = make(chan struct{})
	}
}

// held is the output bytes c's captures hold.
func (c *mcpCall) held() int64 {
	return c.stdout.Total() - c.stdout.Dropped() + c.stderr.Total() - c.stderr.Dropped()
}

// reportLocked queues chunk for a progress notification.
func (c *mcpCall) reportLocked(chunk []byte) {
	if c.progress != nil {
		select {
		case c.progress <- string(chunk):
		default:
		}
	}
}

// endProgress stops c's progress notifications.
func (h *mcpHost) endProgress(c *mcpCall) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.progress != nil {
		close(c.progress)
		c.progress = nil
	}
}

// keepLocked keeps a chunk of c's output. A background process's output
// counts against MaxBackgroundBytes: past it the oldest exited processes
// are evicted, and when only running ones hold the bytes, what does not
// fit is dropped (and counted, so bash_output says so).
func (h *mcpHost) keepLocked(c *mcpCall, stream string, chunk []byte) {
	capt, i := c.stdout, 0
	if stream != "stdout" {
		capt, i = c.stderr, 1
	}
	if !c.bg {
		capt.Write(chunk)
		return
	}
	defer c.changedLocked()
	// Until a capture is full each byte written is held; then it
	// overwrites its tail and holds no more.
	grow := min(int64(len(chunk)), h.set.MaxOutput-(capt.Total()-capt.Dropped()))
	if grow > 0 && h.bgBytes+grow > h.set.MaxBackgroundBytes {
		h.evictLocked(func() bool { return h.bgBytes+grow > h.set.MaxBackgroundBytes }, "mcp.sessions.max_background_bytes", c)
	}
	if room := h.set.MaxBackgroundBytes - h.bgBytes; grow > room {
		room = max(room, 0)
		capt.Write(chunk[:room])
		c.unkept[i] += int64(len(chunk)) - room
		h.bgBytes += room
		return
	}
	capt.Write(chunk)
	h.bgBytes += max(grow, 0)
}

// evictLocked forgets exited background processes but spare, oldest
// first, while more is true; key names the bound that made room necessary.
func (h *mcpHost) evictLocked(more func() bool, key string, spare *mcpCall) {
	for more() {
		var oldest *mcpCall
		id := ""
		for pid, c := range h.procs {
			if c.bg && c.exit != nil && c != spare && (oldest == nil || c.seq < oldest.seq) {
				oldest, id = c, pid
			}
		}
		if oldest == nil {
			return
		}
		h.bgBytes -= oldest.held()
		delete(h.procs, id)
		oldest.changedLocked()
		if len(h.evictQ) == maxEvictedIDs {
			delete(h.evicted, h.evictQ[0])
			h.evictQ = h.evictQ[1:]
		}
		h.evicted[id] = key
		h.evictQ = append(h.evictQ, id)
	}
}

// backgroundCountLocked is how many background processes h keeps.
func (h *mcpHost) backgroundCountLocked() int {
	n := 0
	for _, c := range h.procs {
		if c.bg {
			n++
		}
	}
	return n
}

// follow makes h, new, go on from a host whose sandbox was closed: its
// process ids continue after last, and asking for an older one says gone.
func (h *mcpHost) follow(last int, gone string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n, h.first, h.gone = last, last, gone
}

// lastID is the number of the last process id h issued.
func (h *mcpHost) lastID() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

const mcpSandboxID = "mcp"

// bashInput is the bash tool's input.
type bashInput struct {
	Command    string `json:"command" jsonschema:"the command line, run by bash -c in the sandbox"`
	TimeoutMs  int64  `json:"timeout_ms,omitempty" jsonschema:"stop the command after this many milliseconds (exit code 124); default: the server's limit"`
	Background bool   `json:"background,omitempty" jsonschema:"start it and return at once with its process_id: read its output with bash_output, write to its stdin with write_stdin"`
}

// bashOutput is the bash tool's structured result.
type bashOutput struct {
	ExitCode  int     `json:"exit_code" jsonschema:"the command's exit status: 124 timed out, 126 a gate refused, 127 command not found"`
	Stdout    string  `json:"stdout" jsonschema:"standard output (head and tail when truncated)"`
	Stderr    string  `json:"stderr" jsonschema:"standard error (head and tail when truncated)"`
	TimedOut  bool    `json:"timed_out"`
	Truncated bool    `json:"truncated" jsonschema:"output was cut in the middle; the text says how many bytes"`
	Answer    *string `json:"answer" jsonschema:"what the command passed to submit, if it called it"`
	ProcessID string  `json:"process_id,omitempty" jsonschema:"a background process: its id"`
	Running   bool    `json:"running,omitempty" jsonschema:"a background process: still running (exit_code means nothing yet)"`

	// The exact bytes of stdout, stderr and the answer when they are not
	// UTF-8 (docs/json.md): set by withBytes.
	StdoutBase64 string `json:"stdout_base64,omitempty" jsonschema:"only when stdout is not valid UTF-8: its exact bytes in base64 (stdout then has U+FFFD for each bad byte)"`
	StderrBase64 string `json:"stderr_base64,omitempty" jsonschema:"only when stderr is not valid UTF-8: its exact bytes in base64"`
	AnswerBase64 string `json:"answer_base64,omitempty" jsonschema:"only when answer is not valid UTF-8: its exact bytes in base64"`
}

// bashOutputInput is bash_output's input.
type bashOutputInput struct {
	ProcessID string `json:"process_id" jsonschema:"the process_id bash returned"`
	WaitMs    int64  `json:"wait_ms,omitempty" jsonschema:"wait up to this many milliseconds for output or the exit (default 0: return at once; at most 60000)"`
}

// writeStdinInput is write_stdin's input.
type writeStdinInput struct {
	ProcessID  string `json:"process_id" jsonschema:"the process_id bash returned"`
	Chars      string `json:"chars,omitempty" jsonschema:"text to write to the process's stdin (include newlines)"`
	CloseStdin bool   `json:"close_stdin,omitempty" jsonschema:"then close its stdin (end of input)"`
}

// newMCPHost opens the sandbox and builds the MCP server with its tool;
// initialized, when set, runs when the client has initialized a session.
func newMCPHost(ctx context.Context, srv *rpc.Server, set mcpSettings, initialized func(context.Context, *mcp.InitializedRequest)) (*mcpHost, error) {
	if set.MaxOutput <= 0 {
		set.MaxOutput = sandbox.DefaultMaxOutput
	}
	set.MaxBackground = cmp.Or(max(set.MaxBackground, 0), defaultMCPMaxBackground)
	set.MaxBackgroundBytes = cmp.Or(max(set.MaxBackgroundBytes, 0), defaultMCPMaxBackgroundBytes)
	h := &mcpHost{set: set, procs: map[string]*mcpCall{}, evicted: map[string]string{}}
	h.client, h.served = srv.Connect(context.WithoutCancel(ctx), h.handle)
	fail := func(err error) (*mcpHost, error) {
		h.close()
		return nil, err
	}
	if err := h.client.Call(ctx, rpc.MethodInitialize, rpc.InitializeParams{ClientName: "gatebridge mcp", ProtocolVersion: rpc.ProtocolVersion}, nil); err != nil {
		return fail(err)
	}
	if err := h.client.Call(ctx, rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: mcpSandboxID, Backend: set.Backend,
		Workspace: set.Workspace, WritableWorkspace: set.Writable}, &h.open); err != nil {
		return fail(mcpOpenError(err))
	}
	var docs []rpc.GateDoc
	if err := h.client.Call(ctx, rpc.MethodGateList, struct{}{}, &docs); err != nil {
		return fail(err)
	}
	h.description = h.describe(docs)
	h.server = newMCPServer(h.description, initialized, func(context.Context, *mcp.ServerSession) (*mcpHost, func(), error) { return h, func() {}, nil })
	return h, nil
}

// mcpResolver gives the host (connection and sandbox) of a session, and a
// function to call when the tool call that asked is done with it.
type mcpResolver func(context.Context, *mcp.ServerSession) (h *mcpHost, done func(), err error)

// newMCPServer is an MCP server with the bash tools; resolve gives the
// host of a session.
func newMCPServer(description string, initialized func(context.Context, *mcp.InitializedRequest), resolve mcpResolver) *mcp.Server {
	server := mcp.NewServer(&mcp.Implementation{Name: "gatebridge", Version: versionString()}, &mcp.ServerOptions{InitializedHandler: initialized})
	mcp.AddTool(server, &mcp.Tool{Name: "bash", Description: description}, onHost(resolve, (*mcpHost).bash))
	mcp.AddTool(server, &mcp.Tool{Name: "bash_output", Description: "Read what a background process (bash with background: true) printed since the last read, and its exit status once it has exited."},
		onHost(resolve, (*mcpHost).bashOutput))
	mcp.AddTool(server, &mcp.Tool{Name: "write_stdin", Description: "Write text to a background process's stdin, and optionally close it."},
		onHost(resolve, (*mcpHost).writeStdin))
	return server
}

// onHost is a tool handler that finds the session's host with resolve, then
// calls f on it.
func onHost[In, Out any](resolve mcpResolver,
	f func(*mcpHost, context.Context, *mcp.CallToolRequest, In) (*mcp.CallToolResult, Out, error)) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		h, done, err := resolve(ctx, req.Session)
		if err != nil {
			var none Out
			return nil, none, err
		}
		defer done()
		return f(h, ctx, req, in)
	}
}

// mcpOpenError keeps a sandbox/open failure's hint for the user.
func mcpOpenError(err error) error {
	var e *rpc.Error
	if errors.As(err, &e) {
		if h := hint.Of(e); h != "" {
			return withHint(fmt.Errorf("mcp: open the sandbox: %s", e.Message), h)
		}
		return fmt.Errorf("mcp: open the sandbox: %s", e.Message)
	}
	return fmt.Errorf("mcp: open the sandbox: %w", err)
}

// close ends the protocol connection: every process and the sandbox are
// stopped and removed. It may be called more than once.
func (h *mcpHost) close() {
	h.closeOnce.Do(func() {
		h.client.Close()
		<-h.served
	})
}

// describe is the bash tool's description: how the shell behaves, and
// every gate with its usage.
func (h *mcpHost) describe(docs []rpc.GateDoc) string {
	return capabilityText(h.open.Backend, h.open.WorkspaceInside, h.set.Writable, h.set.Timeout, h.set.MaxOutput, true, docs)
}

// capabilityText says how the sandboxed shell behaves and lists every gate
// with its usage: the bash tool's description, and `gatebridge prompt`.
func capabilityText(backend, workspace string, writable bool, timeout time.Duration, maxOutput int64, background bool, docs []rpc.GateDoc) string {
	var b strings.Builder
	ws := "read-only"
	if writable {
		ws = "writable"
	}
	fmt.Fprintf(&b, "Run a command line with bash in a sandbox (%s backend). It starts in the workspace %s (%s). ", backend, workspace, ws)
	b.WriteString("Files written in the workspace persist between calls of this session; shell state (variables, cd, background jobs) does not: each call is a new bash. ")
	if timeout > 0 {
		fmt.Fprintf(&b, "A call is stopped after %v (timeout_ms to change it; exit code 124). ", timeout)
	}
	fmt.Fprintf(&b, "Output is kept up to %d bytes per stream (head and tail; the middle is dropped and said so).", maxOutput)
	if background {
		b.WriteString(" With background: true the command starts and the call returns its process_id at once: bash_output reads what it printed since the last read (and its exit status once it has exited), write_stdin writes to its stdin.")
	}
	b.WriteString("\n\nHost tools are ordinary commands on PATH: they read arguments and stdin, print, and exit with a status, so they compose with pipes, $?, && and xargs. Exit 126: refused by policy; 127: no such command.\n")
	for _, d := range docs {
		usage := d.Usage
		if usage == "" {
			usage = d.Name
		}
		fmt.Fprintf(&b, "- %s: %s\n", usage, strings.ReplaceAll(d.Summary, "\n", " "))
	}
	return b.String()
}

// handle routes the connection's notifications to the calls in flight.
func (h *mcpHost) handle(m *rpc.Message) {
	switch m.Method {
	case rpc.MethodProcessOutput:
		var p rpc.ProcessOutputParams
		if json.Unmarshal(m.Params, &p) != nil {
			return
		}
		h.mu.Lock()
		if c := h.procs[p.ProcessID]; c != nil {
			h.keepLocked(c, p.Stream, p.Chunk)
			c.reportLocked(p.Chunk)
		}
		h.mu.Unlock()
	case rpc.MethodProcessExited:
		var p rpc.ProcessExitedParams
		if json.Unmarshal(m.Params, &p) != nil {
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		c := h.procs[p.ProcessID]
		switch {
		case c == nil:
		case c.bg: // it stays for bash_output
			c.exit = &p
			c.changedLocked()
		default:
			delete(h.procs, p.ProcessID)
			c.exited <- p // buffered: one exit
		}
	}
}

// bash runs one command line. Cancellation (notifications/cancelled)
// kills the command's process group.
func (h *mcpHost) bash(ctx context.Context, req *mcp.CallToolRequest, in bashInput) (*mcp.CallToolResult, bashOutput, error) {
	if strings.TrimSpace(in.Command) == "" {
		return nil, bashOutput{}, errors.New("command is empty: give the command line to run")
	}
	if in.TimeoutMs < 0 {
		return nil, bashOutput{}, errors.New("timeout_ms must not be negative")
	}
	c := &mcpCall{stdout: sandbox.NewCapture(h.set.MaxOutput), stderr: sandbox.NewCapture(h.set.MaxOutput),
		exited: make(chan rpc.ProcessExitedParams, 1)}
	if token := req.Params.GetProgressToken(); token != nil {
		c.progress = make(chan string, 256)
		go sendProgress(ctx, req.Session, token, c.progress)
	}
	defer h.endProgress(c)
	h.mu.Lock()
	if in.Background {
		if err := h.roomForBackgroundLocked(); err != nil {
			h.mu.Unlock()
			return nil, bashOutput{}, err
		}
		c.bg, c.changed = true, make(chan struct{})
	}
	h.n++
	c.seq = h.n
	id := fmt.Sprintf("bash-%d", h.n)
	h.procs[id] = c
	h.mu.Unlock()
	start := rpc.ProcessStartParams{ProcessID: id, SandboxID: mcpSandboxID, Argv: []string{"bash", "-c", in.Command}, TimeoutMs: in.TimeoutMs, Stdin: in.Background}
	if start.TimeoutMs == 0 {
		start.TimeoutMs = h.set.Timeout.Milliseconds()
	}
	if err := h.client.Call(ctx, rpc.MethodProcessStart, start, nil); err != nil {
		h.mu.Lock()
		if h.procs[id] == c {
			h.bgBytes -= c.held()
			delete(h.procs, id)
		}
		h.mu.Unlock()
		return nil, bashOutput{}, fmt.Errorf("the command could not run: %v", err)
	}
	if in.Background {
		out := bashOutput{ProcessID: id, Running: true}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(
			"[started in the background: process_id %s; bash_output reads its output, write_stdin writes to its stdin]", id)}}}, out, nil
	}
	var ex rpc.ProcessExitedParams
	select {
	case ex = <-c.exited:
	case <-ctx.Done():
		// The client cancelled (notifications/cancelled, or it went away):
		// kill the whole group, and wait for it to go.
		kctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		h.client.Call(kctx, rpc.MethodProcessSignal, rpc.ProcessSignalParams{ProcessID: id, Signal: "KILL"}, nil)
		select {
		case <-c.exited:
		case <-kctx.Done():
		}
		cancel()
		return nil, bashOutput{}, ctx.Err()
	}
	h.mu.Lock()
	out := bashOutput{ExitCode: ex.ExitCode, Stdout: string(c.stdout.Bytes()), Stderr: string(c.stderr.Bytes()),
		TimedOut: ex.TimedOut, Truncated: c.stdout.Dropped()+c.stderr.Dropped() > 0, Answer: ex.ExactAnswer()}.withBytes()
	h.mu.Unlock()
	return toolResult(out, &ex), out, nil
}

// withBytes sets the _base64 fields of o (docs/json.md).
func (o bashOutput) withBytes() bashOutput {
	b64 := func(s string) string {
		if b := lossless.Bytes(s); b != nil {
			return base64.StdEncoding.EncodeToString(b)
		}
		return ""
	}
	o.StdoutBase64, o.StderrBase64 = b64(o.Stdout), b64(o.Stderr)
	if o.Answer != nil {
		o.AnswerBase64 = b64(*o.Answer)
	}
	return o
}

// toolResult is the text content of a result: stdout, then stderr, then
// how it ended (ex nil: still running).
func toolResult(out bashOutput, ex *rpc.ProcessExitedParams) *mcp.CallToolResult {
	var text strings.Builder
	text.WriteString(out.Stdout)
	if out.Stderr != "" {
		if text.Len() > 0 && !strings.HasSuffix(out.Stdout, "\n") {
			text.WriteString("\n")
		}
		text.WriteString("[stderr]\n" + out.Stderr)
	}
	if text.Len() > 0 && !strings.HasSuffix(text.String(), "\n") {
		text.WriteString("\n")
	}
	switch {
	case ex == nil:
		fmt.Fprintf(&text, "[still running: process_id %s]", out.ProcessID)
	case ex.TimedOut:
		fmt.Fprintf(&text, "[timed out: exit code %d]", ex.ExitCode)
	default:
		fmt.Fprintf(&text, "[exit code %d]", ex.ExitCode)
	}
	if out.Answer != nil {
		fmt.Fprintf(&text, "\n[answer: %s]", lossless.Quote(*out.Answer))
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text.String()}}, IsError: ex != nil && ex.ExitCode != 0}
}

// roomForBackgroundLocked makes room for one more background process:
// at MaxBackground the oldest exited one is evicted; when every one kept
// is running, the new one is refused.
func (h *mcpHost) roomForBackgroundLocked() error {
	h.evictLocked(func() bool { return h.backgroundCountLocked() >= h.set.MaxBackground }, "mcp.sessions.max_background", nil)
	if n := h.backgroundCountLocked(); n >= h.set.MaxBackground {
		return fmt.Errorf("cannot start another background process: %d are running, the most this server keeps (mcp.sessions.max_background): "+
			"wait for one to exit (bash_output with wait_ms; each stops at its time limit), close the stdin of one that reads it (write_stdin close_stdin), or run this command without background", n)
	}
	return nil
}

// backgroundLocked returns the background process id names, or an error
// a model can act on: one it had, evicted or gone with a closed sandbox,
// is said so.
func (h *mcpHost) backgroundLocked(id string) (*mcpCall, error) {
	if c := h.procs[id]; c != nil && c.bg {
		return c, nil
	}
	if key, ok := h.evicted[id]; ok {
		return nil, fmt.Errorf("background process %s was evicted: it had exited, and its output and exit status were dropped unread to make room for newer ones (%s); read a process's exit with bash_output sooner", id, key)
	}
	if n, err := strconv.Atoi(strings.TrimPrefix(id, "bash-")); err == nil && strings.HasPrefix(id, "bash-") && n >= 1 && n <= h.first && h.gone != "" {
		return nil, fmt.Errorf("background process %s is gone: %s", id, h.gone)
	}
	return nil, fmt.Errorf("no background process %q (bash with background: true returns the id; a process whose exit was read is gone)", id)
}

// background is backgroundLocked with the lock taken.
func (h *mcpHost) background(id string) (*mcpCall, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.backgroundLocked(id)
}

// bashOutput returns a background process's output since the last call,
// and its exit once it has exited (then it is forgotten).
func (h *mcpHost) bashOutput(ctx context.Context, _ *mcp.CallToolRequest, in bashOutputInput) (*mcp.CallToolResult, bashOutput, error) {
	wait := time.Duration(min(max(in.WaitMs, 0), 60000)) * time.Millisecond
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		h.mu.Lock()
		c, err := h.backgroundLocked(in.ProcessID)
		if err != nil {
			h.mu.Unlock()
			return nil, bashOutput{}, err
		}
		if c.exit != nil || c.stdout.Total() > 0 || c.stderr.Total() > 0 || c.unkept != [2]int64{} || wait == 0 {
			out := bashOutput{ProcessID: in.ProcessID, Running: c.exit == nil, Stdout: string(c.stdout.Bytes()) + unkeptNote(c.unkept[0]),
				Stderr: string(c.stderr.Bytes()) + unkeptNote(c.unkept[1]), Truncated: c.stdout.Dropped()+c.stderr.Dropped()+c.unkept[0]+c.unkept[1] > 0}
			h.bgBytes -= c.held()
			c.stdout, c.stderr, c.unkept = sandbox.NewCapture(h.set.MaxOutput), sandbox.NewCapture(h.set.MaxOutput), [2]int64{}
			ex := c.exit
			if ex != nil {
				out.ExitCode, out.TimedOut, out.Answer = ex.ExitCode, ex.TimedOut, ex.ExactAnswer()
				delete(h.procs, in.ProcessID)
			}
			h.mu.Unlock()
			out = out.withBytes()
			return toolResult(out, ex), out, nil
		}
		changed := c.changed
		h.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			wait = 0
		case <-ctx.Done():
			return nil, bashOutput{}, ctx.Err()
		}
	}
}

// unkeptNote says how many bytes of a stream were not kept ("" for none).
func unkeptNote(n int64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("\n[gatebridge: %d more bytes were dropped, not kept: this session's background output reached mcp.sessions.max_background_bytes; read it sooner with bash_output]\n", n)
}

// writeStdin writes to a background process's stdin.
func (h *mcpHost) writeStdin(ctx context.Context, _ *mcp.CallToolRequest, in writeStdinInput) (*mcp.CallToolResult, any, error) {
	if _, err := h.background(in.ProcessID); err != nil {
		return nil, nil, err
	}
	if in.Chars != "" {
		if err := h.client.Call(ctx, rpc.MethodProcessWrite, rpc.ProcessWriteParams{ProcessID: in.ProcessID, Chunk: []byte(in.Chars)}, nil); err != nil {
			return nil, nil, fmt.Errorf("write: %v", err)
		}
	}
	if in.CloseStdin {
		if err := h.client.Call(ctx, rpc.MethodProcessCloseStdin, rpc.ProcessIDParams{ProcessID: in.ProcessID}, nil); err != nil {
			return nil, nil, fmt.Errorf("close stdin: %v", err)
		}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("[wrote %d bytes]", len(in.Chars))}}}, nil, nil
}

// sendProgress turns output chunks into progress notifications, in order.
func sendProgress(ctx context.Context, s *mcp.ServerSession, token any, chunks <-chan string) {
	n := 0
	for chunk := range chunks {
		n++
		_ = s.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(n), Message: chunk})
	}
}
