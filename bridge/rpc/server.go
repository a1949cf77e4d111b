// Package rpc serves the gatebridge JSON-RPC protocol (docs/jsonrpc.md):
// a runtime in any language opens sandboxes, runs processes in them with
// streamed output, stdin and signals, and answers gates itself.
//
// One [Server] serves any number of connections; each connection (Serve)
// owns its sandboxes, processes and registered gates, and removes all of
// them when it ends. Every call a sandboxed command makes goes through the
// same [bridge.Dispatcher] as `gatebridge run`'s; gates registered over the
// connection are gates like any other, whose Call asks the client.
//
// Everything the client sends is bounded: message size, sandboxes,
// processes, pending gate calls, queued stdin, retained output. A client that
// stops reading blocks the processes whose output it does not read (back
// pressure), never the server's memory.
package rpc

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/gatebridge/gatebridge/bridge/cmdpolicy"
	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/internal/hint"
	"github.com/gatebridge/gatebridge/sandbox"
)

// Defaults of Options fields left zero (the control plane's own limits
// take bridge/control's defaults).
const (
	DefaultMaxMessageBytes = 16 << 20
	DefaultMaxSandboxes    = 16
	DefaultMaxProcesses    = 128
	DefaultMaxPendingCalls = 64
	DefaultMaxReplayBytes  = 1 << 20 // per process: what process/read can replay
	DefaultKeepExited      = 64      // exited processes kept for wait/read/snapshot
)

// HowLocal ends the hint when backend "auto" finds no usable backend, in
// the protocol's words (control.Options.HowLocal).
const HowLocal = `pass backend "local" (no isolation)`

// Options configure a Server: the options of the control plane under it
// (bridge/control, embedded) and the caps of each connection. What the
// control plane's options mean over the protocol:
//   - Backends nil offers none: the program registers them, as
//     cmd/gatebridge does.
//   - CheckWorkspace refuses at sandbox/open: an *Error it returns is the
//     answer, any other error a -32602. Gates is called for gate/list too,
//     with no sandbox.
//   - Approvals: each connection's client is asked (approval/request);
//     Approvals.Timeout is also its deadline. Approvals.Commands, the
//     command policy, decides every process/start before it starts (nil:
//     all allowed).
//   - GateTimeout is the gate/call deadline without timeoutMs.
//   - Pool: the warm pool's sandboxes take no slot of MaxSandboxes until a
//     sandbox/open takes one; Server.Close stops them.
//   - FSMaxFileBytes bounds a file fs/write leaves (gates.max_file_bytes);
//     MaxGateCalls the gate-call records in one process/exited.
//   - HowLocal "" is [HowLocal].
type Options struct {
	control.Options
	// Caps of each connection; zero fields take the defaults above.
	MaxMessageBytes int
	MaxSandboxes    int
	MaxProcesses    int // running at once per connection
	MaxPendingCalls int // gate/call and approval/request awaiting the client
	MaxReplayBytes  int64
	// Version is serverVersion in initialize's result.
	Version string
}

// Server serves the protocol: a front end of the control plane
// (bridge/control), which owns the sandboxes and processes.
type Server struct {
	opts Options
	host *control.Host
}

// NewServer returns a server with opts (zero caps take the defaults).
func NewServer(opts Options) *Server {
	o := &opts
	setDefault(&o.MaxMessageBytes, DefaultMaxMessageBytes)
	setDefault(&o.MaxSandboxes, DefaultMaxSandboxes)
	setDefault(&o.MaxProcesses, DefaultMaxProcesses)
	setDefault(&o.MaxPendingCalls, DefaultMaxPendingCalls)
	setDefault(&o.MaxReplayBytes, DefaultMaxReplayBytes)
	o.HowLocal = cmp.Or(o.HowLocal, HowLocal)
	host := control.New(o.Options)
	o.Options = host.Options() // the control plane's defaults filled
	return &Server{opts: opts, host: host}
}

// Close stops the sandboxes of the server's warm pool (Options.Pool);
// call it once every connection has ended.
func (s *Server) Close() { s.host.Close() }

// PoolStats says what the server's warm pool holds.
func (s *Server) PoolStats() control.PoolStats { return s.host.PoolStats() }

// msec is a protocol's milliseconds as a duration.
func msec(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

func setDefault[T int | int64 | time.Duration](p *T, d T) {
	if *p <= 0 {
		*p = d
	}
}

func (s *Server) limits() ConnLimits {
	o := s.opts
	return ConnLimits{
		MaxMessageBytes: o.MaxMessageBytes, MaxSandboxes: o.MaxSandboxes, MaxProcesses: o.MaxProcesses,
		MaxPendingCalls: o.MaxPendingCalls, MaxRetainedBytes: o.MaxRetainedBytes, MaxReplayBytes: o.MaxReplayBytes,
		DefaultTimeoutMs: o.Process.Timeout.Milliseconds(), GateTimeoutMs: o.GateTimeout.Milliseconds(),
		ApprovalTimeoutMs: o.Approvals.Timeout.Milliseconds(), MaxGateCalls: o.MaxGateCalls,
		MaxCommandBytes: o.MaxCommandBytes, MaxCommands: o.MaxCommands,
		MaxFsChunkBytes: fsChunk(o.MaxMessageBytes), MaxFsFileBytes: cmp.Or(o.FSMaxFileBytes, gates.DefaultMaxFileBytes),
	}
}

// Serve serves one connection: requests from r, responses and
// notifications to w, until r ends or ctx is cancelled. Then it stops and
// removes every process and sandbox of the connection and returns (nil for
// a client that closed its end).
func (s *Server) Serve(ctx context.Context, r io.Reader, w io.Writer) error {
	ctx, cancel := context.WithCancelCause(ctx)
	c := &conn{
		srv:       s,
		ctx:       ctx,
		cancel:    cancel,
		out:       make(chan []byte, 256),
		prio:      make(chan []byte, 1024),
		outDone:   make(chan struct{}),
		sandboxes: map[string]*sbox{},
		procs:     map[string]*proc{},
		pending:   map[string]chan *Message{},
	}
	c.gates = s.host.NewGateSet(answerer{c})
	go c.writeLoop(w)
	err := c.readLoop(r)
	cancel(errDisconnected)
	c.shutdown()
	close(c.out)
	close(c.prio)
	<-c.outDone
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

var errDisconnected = errors.New("the client disconnected")

// conn is one client connection.
type conn struct {
	srv    *Server
	ctx    context.Context
	cancel context.CancelCauseFunc

	// Encoded lines, written by writeLoop: prio (responses, requests to
	// the client, $/cancelRequest) before out (process output and exits,
	// in order), so a gate call or a response does not wait behind
	// megabytes of output the client has not read yet.
	out     chan []byte
	prio    chan []byte
	outDone chan struct{}

	mu          sync.Mutex
	initialized bool
	sandboxes   map[string]*sbox
	procs       map[string]*proc
	exited      []string // exited process ids, oldest first
	running     int
	gates       *control.GateSet // gates the client registered
	nextID      int64
	pending     map[string]chan *Message // server → client requests by id
	workers     sync.WaitGroup
}

// writeLoop writes queued lines to w, prio first; after a write error it
// discards the rest (the connection is ending).
func (c *conn) writeLoop(w io.Writer) {
	defer close(c.outDone)
	bw := bufio.NewWriterSize(w, 64<<10)
	var failed bool
	write := func(line []byte) {
		if failed {
			return
		}
		_, err := bw.Write(line)
		if err == nil && len(c.out) == 0 && len(c.prio) == 0 {
			err = bw.Flush()
			// The client may have been waiting for that (an exit, a
			// response), and the kernel often wakes it on this CPU,
			// where this process goes on with the housekeeping that
			// follows (removing the session: a quarter of a
			// millisecond) while the other CPU idles. Let it read
			// first; when nothing waits here this returns at once.
			yieldCPU()
		}
		if err != nil {
			failed = true
			c.cancel(fmt.Errorf("write to client: %w", err))
		}
	}
	out, prio := c.out, c.prio
	// take writes a line received from *ch, or, when *ch is closed, stops
	// receiving from it.
	take := func(ch *chan []byte, line []byte, ok bool) {
		if !ok {
			*ch = nil
			return
		}
		write(line)
	}
	for out != nil || prio != nil {
		select { // prio first
		case line, ok := <-prio:
			take(&prio, line, ok)
			continue
		default:
		}
		select {
		case line, ok := <-prio:
			take(&prio, line, ok)
		case line, ok := <-out:
			take(&out, line, ok)
		}
	}
	if !failed {
		bw.Flush()
	}
}

// send queues msg (on out when bulk, else on prio); it blocks while the
// queue is full (the client is not reading) and gives up when the
// connection ends.
func (c *conn) send(msg *Message, bulk bool) {
	msg.JSONRPC = "2.0"
	b, err := json.Marshal(msg)
	if err != nil {
		c.srv.opts.Logf("gatebridge: serve: encode %s: %v", msg.Method, err)
		return
	}
	b = append(b, '\n')
	q := c.prio
	if bulk {
		q = c.out
	}
	select {
	case q <- b:
	case <-c.ctx.Done():
		// Still try without blocking: the last messages (process/exited)
		// matter to a client that reads on.
		select {
		case q <- b:
		default:
		}
	}
}

// notify sends a notification; process output, gate calls and exits keep their order
// on the bulk queue.
func (c *conn) notify(method string, params any) {
	p, _ := json.Marshal(params)
	c.send(&Message{Method: method, Params: p}, method == MethodProcessOutput || method == MethodProcessExited || method == MethodProcessGateCall)
}

func (c *conn) reply(id json.RawMessage, result any, err error) {
	if id == nil {
		return // a notification gets no response
	}
	if err != nil {
		c.send(&Message{ID: id, Error: toError(err)}, false)
		return
	}
	r, merr := json.Marshal(result)
	if merr != nil {
		c.send(&Message{ID: id, Error: &Error{Code: CodeInternalError, Message: merr.Error()}}, false)
		return
	}
	c.send(&Message{ID: id, Result: r}, false)
}

// codes are the error codes of the control plane's kinds.
var codes = map[control.Kind]int{
	control.KindInvalid: CodeInvalidParams, control.KindNotFound: CodeNotFound, control.KindConflict: CodeConflict,
	control.KindLimit: CodeLimit, control.KindUnavailable: CodeUnavailable,
}

// toError maps err to the error a client gets: an [*Error] as it is; a
// control plane's error by its kind (control.KindOf), with its hint; a
// backend's failure with its backend and its hint (read with [hint.Of]
// only) in data; an image failure with data.kind (control.DataKind).
func toError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if de, ok := cmdpolicy.IsDenied(err); ok { // data: what decided (docs/jsonrpc.md "policy_denied")
		data := de.Data()
		data.Hint = cmp.Or(hint.Of(err), data.Hint)
		return &Error{Code: CodePolicyDenied, Message: err.Error(), Data: data}
	}
	code := cmp.Or(codes[control.KindOf(err)], CodeInternalError)
	data := map[string]string{}
	var ce *control.Error
	var se *sandbox.Error
	msg := err.Error()
	switch {
	case errors.As(err, &ce):
		if ce.Field != "" {
			msg = "invalid params: " + msg
		}
	case errors.As(err, &se):
		data["backend"] = se.Backend
	}
	if code == CodeInvalidParams && ce == nil {
		msg = "invalid params: " + msg
	}
	if h := hint.Of(err); h != "" && (ce != nil || se != nil) {
		data["hint"] = h
	}
	if k := control.DataKind(err); k != "" {
		data["kind"] = k
	}
	re := &Error{Code: code, Message: msg}
	if len(data) > 0 {
		re.Data = data
	}
	return re
}

func errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// readLoop reads one message per line until r ends.
func (c *conn) readLoop(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	max := c.srv.opts.MaxMessageBytes
	for {
		line, err := readLine(br, max)
		if errors.Is(err, errTooLarge) {
			c.send(&Message{ID: json.RawMessage("null"), Error: errorf(CodeInvalidRequest,
				"message too large: over %d bytes (initialize's limits.maxMessageBytes); send big data in chunks (process/write)", max)}, false)
			continue
		}
		if len(bytes.TrimSpace(line)) > 0 {
			c.handleLine(line)
		}
		if err != nil {
			return err
		}
		if c.ctx.Err() != nil {
			return context.Cause(c.ctx)
		}
	}
}

var errTooLarge = errors.New("message too large")

// readLine returns the next line without its newline. A line over max
// bytes is skipped to its end, never held whole, and reported as
// errTooLarge.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > max+1 { // +1: the newline
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return nil, errTooLarge
		}
		line = append(line, frag...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), err
	}
}

// handleLine decodes and dispatches one message.
func (c *conn) handleLine(line []byte) {
	var m Message
	if err := json.Unmarshal(line, &m); err != nil {
		c.send(&Message{ID: json.RawMessage("null"), Error: errorf(CodeParseError, "parse error: %v", err)}, false)
		return
	}
	if m.JSONRPC != "2.0" {
		c.send(&Message{ID: nullID(m.ID), Error: errorf(CodeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`)}, false)
		return
	}
	if m.Method == "" {
		if m.ID == nil {
			c.send(&Message{ID: json.RawMessage("null"), Error: errorf(CodeInvalidRequest, "invalid request: no method and no id")}, false)
			return
		}
		c.deliver(&m) // a response to a server → client request
		return
	}
	if m.ID != nil && !validID(m.ID) {
		c.send(&Message{ID: json.RawMessage("null"), Error: errorf(CodeInvalidRequest, "invalid request: id must be a string or a number")}, false)
		return
	}
	c.handle(&m)
}

func nullID(id json.RawMessage) json.RawMessage {
	if id == nil || !validID(id) {
		return json.RawMessage("null")
	}
	return id
}

func validID(id json.RawMessage) bool {
	var v any
	if json.Unmarshal(id, &v) != nil {
		return false
	}
	switch v.(type) {
	case string, float64:
		return true
	}
	return false
}

// deliver hands a response to the server request waiting for it.
func (c *conn) deliver(m *Message) {
	var id string
	if json.Unmarshal(m.ID, &id) != nil {
		return
	}
	c.mu.Lock()
	ch := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if ch != nil {
		ch <- m // buffered
	}
}

// handler runs one method; the result is encoded as the response. All
// handlers run in order on the read loop, so that what a request sets up
// (a sandbox's id, a process's id and stdin queue) exists for the next
// request, process/write chunks keep their order, and a signal follows the
// writes sent before it. A handler that must wait (for a backend, a
// process, the client) returns a later: the rest runs on its own goroutine
// and the response is sent when it is done.
type handler func(c *conn, params json.RawMessage) (any, error)

// later is a result still to be computed off the read loop.
type later func() (any, error)

// replier is a later that sends its response itself, through reply (once),
// and may go on working after it: process/start replies once the process's
// session is ready and then runs the command on the same goroutine, so no
// goroutine hand-off (and no wait for the response's write) lies between
// the request and the process's start.
type replier func(reply func(any, error))

var methods = map[string]handler{
	MethodInitialize:        (*conn).initialize,
	MethodSandboxOpen:       (*conn).sandboxOpen,
	MethodSandboxClose:      (*conn).sandboxClose,
	MethodGateRegister:      (*conn).gateRegister,
	MethodGateUnregister:    (*conn).gateUnregister,
	MethodGateList:          (*conn).gateList,
	MethodProcessStart:      (*conn).processStart,
	MethodProcessWrite:      (*conn).processWrite,
	MethodProcessCloseStdin: (*conn).processCloseStdin,
	MethodProcessSignal:     (*conn).processSignal,
	MethodProcessResize:     (*conn).processResize,
	MethodProcessWait:       (*conn).processWait,
	MethodProcessRead:       (*conn).processRead,
	MethodProcessSnapshot:   (*conn).processSnapshot,
	MethodProcessList:       (*conn).processList,
	MethodFsRead:            (*conn).fsRead,
	MethodFsWrite:           (*conn).fsWrite,
	MethodFsList:            (*conn).fsList,
	MethodFsStat:            (*conn).fsStat,
	MethodFsRemove:          (*conn).fsRemove,
	MethodFsMkdir:           (*conn).fsMkdir,
	MethodFsRename:          (*conn).fsRename,
}

func (c *conn) handle(m *Message) {
	switch m.Method {
	case MethodInitialized:
		return
	case MethodGateOutput:
		c.gateOutput(m.Params)
		return
	case MethodCancelRequest:
		return // nothing the client asks of us runs long enough to cancel
	}
	h, ok := methods[m.Method]
	if !ok {
		if m.ID != nil {
			c.reply(m.ID, nil, errorf(CodeMethodNotFound, "method not found: %q", m.Method))
		}
		return
	}
	if m.Method != MethodInitialize {
		c.mu.Lock()
		init := c.initialized
		c.mu.Unlock()
		if !init {
			c.reply(m.ID, nil, errorf(CodeNotInitialized, "%s before initialize: send initialize first", m.Method))
			return
		}
	}
	res, err := h(c, m.Params)
	if err != nil {
		c.reply(m.ID, nil, err)
		return
	}
	switch rest := res.(type) {
	case later:
		c.workers.Add(1)
		go func() {
			defer c.workers.Done()
			res, err := rest()
			c.reply(m.ID, res, err)
		}()
	case replier:
		// Counted as a worker until it has replied: shutdown waits for
		// every response, not for the work that follows one.
		c.workers.Add(1)
		go func() {
			var once sync.Once
			reply := func(res any, err error) {
				once.Do(func() {
					c.reply(m.ID, res, err)
					c.workers.Done()
				})
			}
			defer reply(nil, errorf(CodeInternalError, "%s ended without a response", m.Method))
			rest(reply)
		}()
	default:
		c.reply(m.ID, res, err)
	}
}

// decode unmarshals params strictly: an unknown field or a wrong type is
// -32602 naming the field.
func decode(params json.RawMessage, v any) error {
	if len(params) == 0 || string(params) == "null" {
		params = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return errorf(CodeInvalidParams, "invalid params: field %q: got %s, want %s", te.Field, te.Value, te.Type)
		}
		return errorf(CodeInvalidParams, "invalid params: %v", err)
	}
	return nil
}

func required(field, v string) error {
	if v == "" {
		return errorf(CodeInvalidParams, "invalid params: %q is required", field)
	}
	return nil
}

func (c *conn) initialize(params json.RawMessage) (any, error) {
	var p InitializeParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	supported := false
	for _, v := range SupportedVersions {
		supported = supported || v == p.ProtocolVersion
	}
	if !supported {
		return nil, &Error{Code: CodeInvalidParams,
			Message: fmt.Sprintf("unsupported protocolVersion %d: this server speaks %v", p.ProtocolVersion, SupportedVersions),
			Data:    map[string]any{"supported": SupportedVersions}}
	}
	c.mu.Lock()
	again := c.initialized
	c.initialized = true
	c.mu.Unlock()
	if again {
		return nil, errorf(CodeInvalidRequest, "initialize was already sent on this connection")
	}
	bs := []BackendInfo{}
	for _, e := range c.srv.opts.Backends.Entries() {
		if e.Supported() {
			bs = append(bs, BackendInfo{Name: e.Name, Summary: e.Summary, Isolates: e.Isolates})
		}
	}
	v := c.srv.opts.Version
	if v == "" {
		v = "dev"
	}
	return &InitializeResult{ProtocolVersion: ProtocolVersion, ServerVersion: v, Backends: bs, Limits: c.srv.limits()}, nil
}

// request sends a server → client request and waits for its response,
// until ctx ends (then it sends $/cancelRequest). It fails at once when
// MaxPendingCalls requests already wait.
func (c *conn) request(ctx context.Context, method string, params any) (*Message, error) {
	c.mu.Lock()
	if len(c.pending) >= c.srv.opts.MaxPendingCalls {
		c.mu.Unlock()
		return nil, fmt.Errorf("%d requests already wait for the runtime (limit maxPendingGateCalls)", c.srv.opts.MaxPendingCalls)
	}
	c.nextID++
	id := "s" + strconv.FormatInt(c.nextID, 10)
	ch := make(chan *Message, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	rawID, _ := json.Marshal(id)
	p, _ := json.Marshal(params)
	c.send(&Message{ID: rawID, Method: method, Params: p}, false)
	select {
	case m := <-ch:
		if m.Error != nil {
			return nil, m.Error
		}
		return m, nil
	case <-ctx.Done():
		c.mu.Lock()
		_, waiting := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if waiting && c.ctx.Err() == nil {
			c.notify(MethodCancelRequest, CancelParams{ID: rawID})
		}
		return nil, context.Cause(ctx)
	}
}

// shutdown stops every process and closes every sandbox of the
// connection (it has ended).
func (c *conn) shutdown() {
	c.workers.Wait()
	c.mu.Lock()
	var sbs []*sbox
	for _, sb := range c.sandboxes {
		sbs = append(sbs, sb)
	}
	c.sandboxes = map[string]*sbox{}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, sb := range sbs {
		wg.Add(1)
		go func() { defer wg.Done(); sb.close() }()
	}
	wg.Wait()
}
