package mcpserver

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/internal/lossless"
	"github.com/gatebridge/gatebridge/sandbox"
)

// host is an MCP server whose bash tool runs commands in one sandbox of
// the control plane: the same sandboxes, gates, limits and cleanup as
// `gatebridge serve`, with no protocol in between.
type host struct {
	srv    *Server
	opts   Options
	sb     *control.Sandbox
	ctx    context.Context // the processes' (a call's own ends with the call)
	cancel context.CancelFunc
	server *mcp.Server

	description string
	// elicit asks the session's person about gate calls that need
	// approval, when its client declared elicitation.
	elicit *elicitor

	// mu guards the calls and all their state.
	mu      sync.Mutex
	n       int              // process ids issued (bash-1 … bash-n)
	procs   map[string]*call // calls in flight, and background processes kept
	running int              // processes running
	bgBytes int64            // output bytes the background ones hold
	evicted map[string]string
	evictQ  []string // evicted's keys, oldest first
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

// call is one bash call in flight, or a background process kept. Its
// fields are guarded by the host's mu.
type call struct {
	id             string
	seq            int
	proc           *control.Process
	stdout, stderr *sandbox.Capture
	exited         chan control.Exit
	progress       chan string // best effort: dropped when the client is slow; nil when closed

	// A background process: its output since the last bash_output, its
	// exit once known, and a channel closed at each change.
	bg      bool
	exit    *control.Exit
	changed chan struct{}
	// Output bytes not kept because the session's background output was at
	// mcp.sessions.max_background_bytes: stdout, stderr.
	unkept [2]int64
}

func (c *call) changedLocked() {
	if c.changed != nil {
		close(c.changed)
		c.changed = make(chan struct{})
	}
}

// held is the output bytes c's captures hold.
func (c *call) held() int64 {
	return c.stdout.Total() - c.stdout.Dropped() + c.stderr.Total() - c.stderr.Dropped()
}

// reportLocked queues chunk for a progress notification.
func (c *call) reportLocked(chunk []byte) {
	if c.progress != nil {
		select {
		case c.progress <- string(chunk):
		default:
		}
	}
}

// endProgress stops c's progress notifications.
func (h *host) endProgress(c *call) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.progress != nil {
		close(c.progress)
		c.progress = nil
	}
}

// output is the writer of one stream of a call's process: what the
// command prints is kept (and reported) as it comes.
type output struct {
	h      *host
	c      *call
	stream int // 0 stdout, 1 stderr
}

func (w *output) Write(b []byte) (int, error) {
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.procs[w.c.id] == w.c {
		h.keepLocked(w.c, w.stream, b)
		w.c.reportLocked(b)
	}
	return len(b), nil
}

// keepLocked keeps a chunk of c's output. A background process's output
// counts against MaxBackgroundBytes: past it the oldest exited processes
// are evicted, and when only running ones hold the bytes, what does not
// fit is dropped (and counted, so bash_output says so).
func (h *host) keepLocked(c *call, stream int, chunk []byte) {
	capt := c.stdout
	if stream != 0 {
		capt = c.stderr
	}
	if !c.bg {
		capt.Write(chunk)
		return
	}
	defer c.changedLocked()
	// Until a capture is full each byte written is held; then it
	// overwrites its tail and holds no more.
	grow := min(int64(len(chunk)), h.opts.MaxOutput-(capt.Total()-capt.Dropped()))
	if grow > 0 && h.bgBytes+grow > h.opts.MaxBackgroundBytes {
		h.evictLocked(func() bool { return h.bgBytes+grow > h.opts.MaxBackgroundBytes }, "mcp.sessions.max_background_bytes", c)
	}
	if room := h.opts.MaxBackgroundBytes - h.bgBytes; grow > room {
		room = max(room, 0)
		capt.Write(chunk[:room])
		c.unkept[stream] += int64(len(chunk)) - room
		h.bgBytes += room
		return
	}
	capt.Write(chunk)
	h.bgBytes += max(grow, 0)
}

// exited records c's exit (after all its output): a background process
// stays for bash_output; a call in flight gets it.
func (h *host) exited(c *call, ex control.Exit) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.running--
	switch {
	case h.procs[c.id] != c:
	case c.bg:
		c.exit = &ex
		c.changedLocked()
	default:
		delete(h.procs, c.id)
	}
	c.exited <- ex // buffered: one exit
}

// evictLocked forgets exited background processes but spare, oldest
// first, while more is true; key names the bound that made room necessary.
func (h *host) evictLocked(more func() bool, key string, spare *call) {
	for more() {
		var oldest *call
		for _, c := range h.procs {
			if c.bg && c.exit != nil && c != spare && (oldest == nil || c.seq < oldest.seq) {
				oldest = c
			}
		}
		if oldest == nil {
			return
		}
		h.bgBytes -= oldest.held()
		delete(h.procs, oldest.id)
		oldest.changedLocked()
		if len(h.evictQ) == maxEvictedIDs {
			delete(h.evicted, h.evictQ[0])
			h.evictQ = h.evictQ[1:]
		}
		h.evicted[oldest.id] = key
		h.evictQ = append(h.evictQ, oldest.id)
	}
}

// backgroundCountLocked is how many background processes h keeps.
func (h *host) backgroundCountLocked() int {
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
func (h *host) follow(last int, gone string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n, h.first, h.gone = last, last, gone
}

// lastID is the number of the last process id h issued.
func (h *host) lastID() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

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
	// The gate calls the command made, once it has exited (records as
	// run --json's calls; secrets redacted), and how many more were made
	// than are listed.
	Calls        []gateCall `json:"calls,omitempty" jsonschema:"once it has exited: the gate calls the command made, in order (at most the server's limit)"`
	CallsDropped int        `json:"calls_dropped,omitempty" jsonschema:"gate calls made but not listed in calls"`
	Running      bool       `json:"running,omitempty" jsonschema:"a background process: still running (exit_code means nothing yet)"`

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

// newHost opens a sandbox and builds the MCP server with its tools;
// initialized, when set, runs when the client has initialized a session.
func (s *Server) newHost(ctx context.Context, initialized func(context.Context, *mcp.InitializedRequest)) (*host, error) {
	o := s.opts
	h := &host{srv: s, opts: o, procs: map[string]*call{}, evicted: map[string]string{}, elicit: &elicitor{}}
	// The client's capabilities are known once it has initialized, after
	// the sandbox opens: the Approver is there from the start, and
	// present only while the client declared elicitation.
	sb, err := s.ctl.Open(ctx, control.SandboxSpec{ID: sandboxID, Backend: o.Backend, Workspace: o.Workspace,
		Writable: o.Writable, Approver: mcpApprover{control.FromApproval(h.elicit), h.elicit}})
	if err != nil {
		return nil, openError(err)
	}
	h.sb = sb
	h.ctx, h.cancel = context.WithCancel(context.WithoutCancel(ctx))
	h.description = h.describe()
	h.server = s.newMCPServer(h.description, initialized, func(context.Context, *mcp.ServerSession) (*host, func(), error) { return h, func() {}, nil })
	return h, nil
}

// resolver gives the host (its sandbox) of a session, and a function to
// call when the tool call that asked is done with it.
type resolver func(context.Context, *mcp.ServerSession) (h *host, done func(), err error)

// newMCPServer is an MCP server with the bash tools; resolve gives the
// host of a session.
func (s *Server) newMCPServer(description string, initialized func(context.Context, *mcp.InitializedRequest), resolve resolver) *mcp.Server {
	server := mcp.NewServer(&mcp.Implementation{Name: "gatebridge", Version: s.opts.Version}, &mcp.ServerOptions{InitializedHandler: initialized})
	mcp.AddTool(server, &mcp.Tool{Name: "bash", Description: description}, onHost(resolve, (*host).bash))
	mcp.AddTool(server, &mcp.Tool{Name: "bash_output", Description: "Read what a background process (bash with background: true) printed since the last read, and its exit status once it has exited."},
		onHost(resolve, (*host).bashOutput))
	mcp.AddTool(server, &mcp.Tool{Name: "write_stdin", Description: "Write text to a background process's stdin, and optionally close it."},
		onHost(resolve, (*host).writeStdin))
	return server
}

// onHost is a tool handler that finds the session's host with resolve, then
// calls f on it.
func onHost[In, Out any](resolve resolver,
	f func(*host, context.Context, *mcp.CallToolRequest, In) (*mcp.CallToolResult, Out, error)) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		h, done, err := resolve(ctx, req.Session)
		if err != nil {
			var none Out
			return nil, none, err
		}
		defer done()
		h.elicit.setSession(req.Session)
		return f(h, ctx, req, in)
	}
}

// close closes the sandbox: every process is stopped, and the sandbox
// removed. It may be called more than once.
func (h *host) close() {
	h.closeOnce.Do(func() {
		h.sb.Close()
		h.cancel()
	})
}

// bash runs one command line. Cancellation (notifications/cancelled)
// kills the command's process group.
func (h *host) bash(ctx context.Context, req *mcp.CallToolRequest, in bashInput) (*mcp.CallToolResult, bashOutput, error) {
	if strings.TrimSpace(in.Command) == "" {
		return nil, bashOutput{}, errors.New("command is empty: give the command line to run")
	}
	if in.TimeoutMs < 0 {
		return nil, bashOutput{}, errors.New("timeout_ms must not be negative")
	}
	argv := []string{"bash", "-c", in.Command}
	c := &call{stdout: sandbox.NewCapture(h.opts.MaxOutput), stderr: sandbox.NewCapture(h.opts.MaxOutput),
		exited: make(chan control.Exit, 1)}
	if token := req.Params.GetProgressToken(); token != nil {
		c.progress = make(chan string, 256)
		go sendProgress(ctx, req.Session, token, c.progress)
	}
	defer h.endProgress(c)
	h.mu.Lock()
	if h.running >= maxRunning {
		h.mu.Unlock()
		return nil, bashOutput{}, fmt.Errorf("the command could not run: %d processes are running in this session, the most it may run at once; wait for one to exit", h.running)
	}
	if in.Background {
		if err := h.roomForBackgroundLocked(); err != nil {
			h.mu.Unlock()
			return nil, bashOutput{}, err
		}
		c.bg, c.changed = true, make(chan struct{})
	}
	h.n++
	c.seq = h.n
	c.id = "bash-" + strconv.Itoa(h.n)
	h.procs[c.id] = c
	h.running++
	h.mu.Unlock()
	timeout := time.Duration(in.TimeoutMs) * time.Millisecond
	if timeout == 0 {
		timeout = h.opts.Timeout
	}
	p, err := h.sb.Start(h.ctx, control.ProcessSpec{ID: c.id, Argv: argv, OpenStdin: in.Background,
		Stdout: &output{h, c, 0}, Stderr: &output{h, c, 1}, Timeout: timeout,
		OnExit: func(ex control.Exit) { h.exited(c, ex) }})
	if err != nil {
		h.mu.Lock()
		h.running--
		if h.procs[c.id] == c {
			h.bgBytes -= c.held()
			delete(h.procs, c.id)
		}
		h.mu.Unlock()
		if control.KindOf(err) == control.KindPolicy {
			// The command policy refused the line before any of it ran.
			return nil, bashOutput{}, toolError(err)
		}
		return nil, bashOutput{}, fmt.Errorf("the command could not run: %v", err)
	}
	h.mu.Lock()
	c.proc = p
	h.mu.Unlock()
	if in.Background {
		out := bashOutput{ProcessID: c.id, Running: true}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(
			"[started in the background: process_id %s; bash_output reads its output, write_stdin writes to its stdin]", c.id)}}}, out, nil
	}
	var ex control.Exit
	select {
	case ex = <-c.exited:
	case <-ctx.Done():
		// The client cancelled (notifications/cancelled, or it went away):
		// kill the whole group, and wait for it to go.
		p.Signal(syscall.SIGKILL)
		select {
		case <-c.exited:
		case <-time.After(10 * time.Second):
		}
		return nil, bashOutput{}, ctx.Err()
	}
	h.mu.Lock()
	out := bashOutput{ExitCode: ex.Code, Stdout: string(c.stdout.Bytes()), Stderr: string(c.stderr.Bytes()),
		TimedOut: ex.TimedOut, Truncated: c.stdout.Dropped()+c.stderr.Dropped() > 0, Answer: ex.Answer,
		Calls: gateCalls(ex.GateCalls), CallsDropped: ex.GateCallsDropped}.withBytes()
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
func toolResult(out bashOutput, ex *control.Exit) *mcp.CallToolResult {
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
	text.WriteString(gateCallLines(out.Calls, out.CallsDropped))
	switch {
	case ex == nil:
		fmt.Fprintf(&text, "[still running: process_id %s]", out.ProcessID)
	case ex.TimedOut:
		fmt.Fprintf(&text, "[timed out: exit code %d]", ex.Code)
	default:
		fmt.Fprintf(&text, "[exit code %d]", ex.Code)
	}
	if out.Answer != nil {
		fmt.Fprintf(&text, "\n[answer: %s]", lossless.Quote(*out.Answer))
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text.String()}}, IsError: ex != nil && ex.Code != 0}
}

// roomForBackgroundLocked makes room for one more background process:
// at MaxBackground the oldest exited one is evicted; when every one kept
// is running, the new one is refused.
func (h *host) roomForBackgroundLocked() error {
	h.evictLocked(func() bool { return h.backgroundCountLocked() >= h.opts.MaxBackground }, "mcp.sessions.max_background", nil)
	if n := h.backgroundCountLocked(); n >= h.opts.MaxBackground {
		return fmt.Errorf("cannot start another background process: %d are running, the most this server keeps (mcp.sessions.max_background): "+
			"wait for one to exit (bash_output with wait_ms; each stops at its time limit), close the stdin of one that reads it (write_stdin close_stdin), or run this command without background", n)
	}
	return nil
}

// backgroundLocked returns the background process id names, or an error
// a model can act on: one it had, evicted or gone with a closed sandbox,
// is said so.
func (h *host) backgroundLocked(id string) (*call, error) {
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

// bashOutput returns a background process's output since the last call,
// and its exit once it has exited (then it is forgotten).
func (h *host) bashOutput(ctx context.Context, _ *mcp.CallToolRequest, in bashOutputInput) (*mcp.CallToolResult, bashOutput, error) {
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
			c.stdout, c.stderr, c.unkept = sandbox.NewCapture(h.opts.MaxOutput), sandbox.NewCapture(h.opts.MaxOutput), [2]int64{}
			ex := c.exit
			if ex != nil {
				out.ExitCode, out.TimedOut, out.Answer = ex.Code, ex.TimedOut, ex.Answer
				out.Calls, out.CallsDropped = gateCalls(ex.GateCalls), ex.GateCallsDropped
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
func (h *host) writeStdin(_ context.Context, _ *mcp.CallToolRequest, in writeStdinInput) (*mcp.CallToolResult, any, error) {
	h.mu.Lock()
	c, err := h.backgroundLocked(in.ProcessID)
	var p *control.Process
	if c != nil {
		p = c.proc
	}
	h.mu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	if p == nil {
		return nil, nil, fmt.Errorf("background process %s is still starting: write again", in.ProcessID)
	}
	if in.Chars != "" {
		if err := p.Write([]byte(in.Chars)); err != nil {
			return nil, nil, fmt.Errorf("write: %v", err)
		}
	}
	if in.CloseStdin {
		p.CloseStdin()
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
