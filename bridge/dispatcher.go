package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/gates/secrets"
	"github.com/gatebridge/gatebridge/internal/hint"
	"github.com/gatebridge/gatebridge/internal/lossless"
)

// Decision is what became of one call.
type Decision string

// Decisions recorded for each call attempt.
const (
	DecisionRan      Decision = "ran"       // the gate ran (whatever its exit code)
	DecisionDenied   Decision = "denied"    // refused by policy or by the approval hook (exit 126)
	DecisionRejected Decision = "rejected"  // the call itself was malformed or over a limit
	DecisionTimedOut Decision = "timed_out" // the gate outlived its timeout (exit 124)
	DecisionUnknown  Decision = "unknown"   // no such gate (exit 127)
	DecisionCanceled Decision = "canceled"  // the run ended or the caller went away while the gate ran (exit 124)
)

// CallRecord describes one call attempt.
//
// Args are the caller's bytes (capped). In JSON an argument that is not
// UTF-8 reads with U+FFFD for its bad bytes, and ArgsBase64 carries the
// exact bytes of every such argument (nil for the others; no ArgsBase64
// when all are UTF-8): the one rule of docs/json.md. So with Gate: a name
// the sandbox called that is no gate (an unknown gate's, which nothing
// validated) may be any bytes, and GateBase64 carries them when they are
// not UTF-8.
type CallRecord struct {
	ID         string   `json:"id"`
	Gate       string   `json:"gate"`
	GateBase64 []byte   `json:"gate_base64,omitempty"`
	Args       []string `json:"args"` // capped: 64 args of 256 bytes each
	ArgsBase64 [][]byte `json:"args_base64,omitempty"`
	ExitCode   int      `json:"exit_code"`
	Decision   Decision `json:"decision"`
	// DecidedBy says who decided a call of a gate that needs approval,
	// when the approval hook says ([NoteDecidedBy]; bridge/approval's
	// By: "person", "runtime", "grant", "config", "policy", "timeout",
	// "limit", "canceled", "no_one"); "" when no one was asked.
	DecidedBy string        `json:"decided_by,omitempty"`
	Start     time.Time     `json:"-"`
	Duration  time.Duration `json:"-"`
	// DurationMS is Duration in milliseconds (for JSON).
	DurationMS float64 `json:"duration_ms"`
	BytesIn    int64   `json:"bytes_in"`  // args + stdin
	BytesOut   int64   `json:"bytes_out"` // stdout + stderr
	Error      string  `json:"error,omitempty"`
	// Events are what the gate did on the host that its output does not
	// show (an http gate's requests: see [gates.Call].Audit), redacted; at
	// most maxEvents, the rest counted in EventsOmitted.
	Events        []json.RawMessage `json:"events,omitempty"`
	EventsOmitted int               `json:"events_omitted,omitempty"`
}

// maxEvents bounds the events one call record keeps.
const maxEvents = 32

// Request is one gate call, whatever transport carried it.
type Request struct {
	// ID is the transport's name for the call (records and logs only).
	ID    string
	Gate  string
	Args  []string
	Stdin []byte // nil: none sent
	// Cwd is the caller's working directory as the sandbox sees it ("":
	// unknown); file gates resolve relative paths against it.
	Cwd string
	// Start is when the transport noticed the call; zero means now.
	Start time.Time
	// Stdout and Stderr, when set, receive the gate's output as it writes
	// it (capped); the Response then holds only gatebridge's own messages.
	Stdout, Stderr io.Writer
}

// Response is the answer to a [Request]: what the caller's command
// prints and exits with, and the record of the call.
type Response struct {
	ExitCode int
	// Stdout and Stderr are the gate's output (when not streamed), with
	// gatebridge's messages ("gatebridge: GATE: …") appended to Stderr.
	Stdout, Stderr []byte
	Record         CallRecord
}

// ApproveFunc decides whether a call may run; a non-nil error refuses it
// with exit 126 and the error as the message. It runs before the gate, with
// the call's context.
type ApproveFunc func(ctx context.Context, spec gates.Spec, req *Request) error

type decidedByKey struct{}

// NoteDecidedBy, called by an [ApproveFunc] with the context it was
// given, before it returns, records who decided the call
// ([CallRecord.DecidedBy]); elsewhere it does nothing.
func NoteDecidedBy(ctx context.Context, by string) {
	if p, ok := ctx.Value(decidedByKey{}).(*string); ok {
		*p = by
	}
}

// errRunEnded cancels the gates of a run that timed out or was cancelled.
var errRunEnded = fmt.Errorf("cancelled: the command's run ended (timeout or interrupt): %w", context.Canceled)

// Dispatcher runs gate calls for any transport: it looks the gate up, asks
// the approval hook, runs the gate with its timeout under max_concurrent,
// recovers panics, caps output, and keeps the call records and the audit
// log. The mailbox server of a [Session] is one front end; a protocol
// server is another.
type Dispatcher struct {
	cfg     Config // validated
	session string // session id for the audit log

	slots  chan struct{}  // max_concurrent: held until a gate really returns
	gateWG sync.WaitGroup // gate goroutines, abandoned ones included

	mu      sync.Mutex
	records []CallRecord // at most Limits.MaxRecords
	omitted int
	results map[string]string
	observe func(CallRecord)
	auditMu sync.Mutex
}

// NewDispatcher returns a dispatcher for cfg's gates and limits; session
// names it in audit records.
func NewDispatcher(cfg Config, session string) (*Dispatcher, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Dispatcher{cfg: cfg, session: session, slots: make(chan struct{}, cfg.Limits.MaxConcurrent), results: map[string]string{}}, nil
}

// Dispatch runs req and returns its response; it does not record it (the
// transport adds what delivery cost, then calls [Dispatcher.Record]).
// Cancelling ctx cancels the gate; context.Cause(ctx) says why in the
// record (a run that ended, a caller that went away).
func (d *Dispatcher) Dispatch(ctx context.Context, req *Request) *Response {
	start := req.Start
	if start.IsZero() {
		start = time.Now()
	}
	bytesIn := int64(len(req.Gate) + len(req.Stdin))
	for _, a := range req.Args {
		bytesIn += int64(len(a))
	}
	// Redacted before the cut: the sandbox chooses what comes before a
	// secret, and a cut through it would keep its first bytes.
	rec := CallRecord{ID: req.ID, Gate: d.cfg.Redact.String(req.Gate), Args: capArgs(req.Args, d.cfg.Redact), Start: start, BytesIn: bytesIn}
	resp := &Response{}
	g, err := d.cfg.Gates.Lookup(req.Gate)
	if err != nil {
		rec.Decision, rec.ExitCode = DecisionUnknown, gates.ExitUnknown
		rec.Error = "unknown gate " + lossless.QuoteCap(rec.Gate, 64)
		resp.Stderr = []byte("gatebridge: " + rec.Error + "\n")
		return d.done(resp, rec)
	}
	spec := g.Spec()
	lim := d.cfg.Limits.MaxOutputBytes
	stdout, stderr := newCapWriter(lim, req.Stdout), newCapWriter(lim, req.Stderr)
	// The conventions every gate shares (gates.WantsHelp, gates.ParamArgs)
	// come before approval and policy: "--help" alone runs nothing, and
	// what is approved and checked is the words a JSON object became.
	if gates.WantsHelp(g, req.Args) {
		gates.WriteHelp(stdout, g)
		resp.Stdout = stdout.Bytes()
		rec.Decision, rec.ExitCode = DecisionRan, gates.ExitOK
		return d.done(resp, rec)
	}
	if args, ok, err := gates.ParamArgs(g, req.Args); err != nil {
		rec.Decision, rec.ExitCode = DecisionRejected, gates.ExitCodeOf(0, err)
		rec.Error = err.Error()
		resp.Stderr = []byte("gatebridge: " + req.Gate + ": " + strings.TrimPrefix(rec.Error, req.Gate+": ") + "\n")
		return d.done(resp, rec)
	} else if ok {
		if len(args) > d.cfg.Limits.MaxArgs {
			rec.Decision, rec.ExitCode = DecisionRejected, gates.ExitDenied
			rec.Error = fmt.Sprintf("its JSON parameters make more than %d arguments (%s)", d.cfg.Limits.MaxArgs, d.cfg.limitNote("max_args"))
			resp.Stderr = []byte("gatebridge: " + req.Gate + ": " + rec.Error + "\n")
			return d.done(resp, rec)
		}
		r := *req
		r.Args = args
		req = &r
		rec.Args = capArgs(args, d.cfg.Redact)
	}
	if d.cfg.Approve != nil {
		actx := context.WithValue(ctx, decidedByKey{}, &rec.DecidedBy)
		if err := d.cfg.Approve(actx, spec, req); err != nil {
			rec.Decision, rec.ExitCode = DecisionDenied, gates.ExitDenied
			rec.Error = "not approved: " + err.Error()
			resp.Stderr = []byte("gatebridge: " + req.Gate + ": " + rec.Error + "\n")
			if h := hint.Of(err); h != "" {
				resp.Stderr = append(resp.Stderr, "gatebridge: hint: "+h+"\n"...)
			}
			return d.done(resp, rec)
		}
	}
	timeout := spec.Timeout
	if timeout <= 0 {
		timeout = d.cfg.Limits.GateTimeout
	}
	if ctx.Err() != nil { // the caller went away before the gate started
		rec.Decision, rec.ExitCode = DecisionCanceled, gates.ExitTimeout
		rec.Error = context.Cause(ctx).Error()
		return d.done(resp, rec)
	}
	// Secrets are redacted before the cap (a cut could split one) and
	// before anything streams; what the writers hold back goes when the
	// gate has returned.
	redOut, redErr := d.cfg.Redact.Writer(stdout), d.cfg.Redact.Writer(stderr)
	ev := &eventLog{red: d.cfg.Redact}
	code, gerr := d.invoke(ctx, g, timeout, &gates.Call{
		SessionID: d.session, ID: req.ID, Args: req.Args, Stdin: req.Stdin, Cwd: req.Cwd,
		Stdout: redOut, Stderr: redErr, Results: d, Audit: ev.add,
	})
	redOut.Flush()
	redErr.Flush()
	rec.Events, rec.EventsOmitted = ev.close()
	resp.Stdout, resp.Stderr = stdout.Bytes(), stderr.Bytes()
	rec.ExitCode, rec.Decision = code, DecisionRan
	var cancelled *cancelError
	switch {
	case errors.Is(gerr, context.DeadlineExceeded):
		rec.Decision = DecisionTimedOut
		rec.Error = fmt.Sprintf("timed out after %v", timeout)
		source := "gate timeout, " + d.cfg.limitKey("gate_timeout")
		if spec.Timeout > 0 {
			source = "gate timeout, set by the gate itself"
		}
		resp.Stderr = appendMsg(resp.Stderr, fmt.Sprintf("gatebridge: %s: timed out after %v (%s)", req.Gate, timeout, source))
	case errors.As(gerr, &cancelled):
		rec.Decision = DecisionCanceled
		rec.Error = cancelled.Error()
		resp.Stderr = appendMsg(resp.Stderr, "gatebridge: "+req.Gate+": "+cancelled.Error())
	case gerr != nil:
		rec.Error = gerr.Error()
		if code == gates.ExitDenied {
			rec.Decision = DecisionDenied
		}
		resp.Stderr = appendMsg(resp.Stderr, "gatebridge: "+req.Gate+": "+strings.TrimPrefix(gerr.Error(), req.Gate+": "))
	}
	if dropped := stdout.Dropped() + stderr.Dropped(); dropped > 0 {
		resp.Stderr = appendMsg(resp.Stderr, fmt.Sprintf("gatebridge: %s: output truncated: %d bytes dropped (%s=%d)",
			req.Gate, dropped, d.cfg.limitKey("max_output_bytes"), lim))
	}
	return d.done(resp, rec)
}

func (d *Dispatcher) done(resp *Response, rec CallRecord) *Response {
	// gatebridge's messages quote the gate's errors, which may quote
	// what the gate was given.
	resp.Stderr = d.cfg.Redact.Bytes(resp.Stderr)
	rec = d.redact(rec)
	resp.ExitCode = rec.ExitCode
	rec.BytesOut = int64(len(resp.Stdout) + len(resp.Stderr))
	rec.Duration = time.Since(rec.Start)
	rec.DurationMS = float64(rec.Duration.Microseconds()) / 1000
	rec.ArgsBase64 = lossless.List(rec.Args)
	rec.GateBase64 = lossless.Bytes(rec.Gate)
	resp.Record = rec
	return resp
}

// Reject answers a call the transport could not read or refused (a
// malformed call, a limit) with code and err's message.
func (d *Dispatcher) Reject(id string, start time.Time, code int, err error) *Response {
	msg := err.Error()
	rec := CallRecord{ID: id, Decision: DecisionRejected, ExitCode: code, Error: msg, Start: start}
	return d.done(&Response{Stderr: []byte("gatebridge: " + msg + "\n")}, rec)
}

// cancelError is a gate cancelled for a reason other than its timeout.
type cancelError struct{ cause error }

func (e *cancelError) Error() string { return e.cause.Error() }
func (e *cancelError) Unwrap() error { return e.cause }

// invoke runs the gate with a timeout, recovering panics. A gate that
// ignores its context is abandoned at the deadline (plus a short grace) so
// the caller still gets exit 124.
func (d *Dispatcher) invoke(parent context.Context, g gates.Gate, timeout time.Duration, c *gates.Call) (int, error) {
	// A slot of max_concurrent is held until the gate really returns, even
	// when the caller was answered 124 and the gate abandoned: a gate that
	// ignores its context cannot make the host run more than max_concurrent.
	// The gate's timeout starts once it has a slot.
	select {
	case d.slots <- struct{}{}:
	case <-parent.Done():
		return gates.ExitTimeout, &cancelError{cause(parent)}
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	type res struct {
		code int
		err  error
	}
	done := make(chan res, 1)
	d.gateWG.Add(1)
	go func() {
		defer d.gateWG.Done()
		defer func() { <-d.slots }()
		defer func() {
			if p := recover(); p != nil {
				done <- res{gates.ExitFailure, fmt.Errorf("panic: %v", p)}
			}
		}()
		code, err := g.Call(ctx, c)
		done <- res{code, err}
	}()
	var r res
	select {
	case r = <-done:
	case <-ctx.Done():
		select {
		case r = <-done:
		case <-time.After(500 * time.Millisecond):
			r = res{gates.ExitTimeout, ctx.Err()}
		}
	}
	if ctx.Err() != nil && (r.err != nil || r.code != 0) {
		if parent.Err() != nil {
			return gates.ExitTimeout, &cancelError{cause(parent)}
		}
		return gates.ExitTimeout, context.DeadlineExceeded
	}
	return gates.ExitCodeOf(r.code, r.err), r.err
}

// cause is why ctx was cancelled, as a message for the caller.
func cause(ctx context.Context) error {
	if c := context.Cause(ctx); c != nil && c != context.Canceled && c != context.DeadlineExceeded {
		return c
	}
	return errRunEnded
}

// Record adds rec to the records (the first Limits.MaxRecords of them;
// the rest are counted) and to the audit log.
func (d *Dispatcher) Record(rec CallRecord) {
	rec = d.redact(rec) // the transport may have added to it
	rec.Args = capRecordArgs(rec.Args, d.cfg.Limits.MaxRecordBytes, d.cfg.limitKey)
	rec.ArgsBase64 = lossless.List(rec.Args)
	rec.GateBase64 = lossless.Bytes(rec.Gate)
	d.mu.Lock()
	if len(d.records) < d.cfg.Limits.MaxRecords {
		d.records = append(d.records, rec)
	} else {
		d.omitted++
	}
	observe := d.observe
	d.mu.Unlock()
	if observe != nil {
		observe(rec)
	}
	if d.cfg.Audit != nil {
		line, err := json.Marshal(auditRecord{Time: rec.Start.UTC(), Session: d.session, CallRecord: rec})
		if err == nil {
			d.auditMu.Lock()
			d.cfg.Audit.Write(append(line, '\n'))
			d.auditMu.Unlock()
		}
	}
}

// audit appends one record (a command's) to the audit log, its strings
// redacted.
func (d *Dispatcher) audit(rec CommandRecord) {
	if d.cfg.Audit == nil {
		return
	}
	if red := d.cfg.Redact; red.Active() {
		rec.Argv = slices.Clone(rec.Argv)
		for i, a := range rec.Argv {
			rec.Argv[i] = red.String(a)
		}
		rec.ArgvBase64 = lossless.List(rec.Argv)
	}
	line, err := json.Marshal(rec)
	if err == nil {
		d.auditMu.Lock()
		d.cfg.Audit.Write(append(line, '\n'))
		d.auditMu.Unlock()
	}
}

// redact replaces secret values in the strings of rec.
func (d *Dispatcher) redact(rec CallRecord) CallRecord {
	red := d.cfg.Redact
	if !red.Active() {
		return rec
	}
	rec.Error = red.String(rec.Error)
	rec.Gate = red.String(rec.Gate)
	args := make([]string, len(rec.Args))
	for i, a := range rec.Args {
		args[i] = red.String(a)
	}
	rec.Args = args
	return rec
}

// eventLog keeps a call's events (gates.Call.Audit) until the gate
// returns; events after that are dropped.
type eventLog struct {
	red     *secrets.Redactor
	mu      sync.Mutex
	list    []json.RawMessage
	omitted int
	closed  bool
}

func (l *eventLog) add(event any) {
	b, err := json.Marshal(event)
	if err != nil || len(b) == 0 || b[0] != '{' {
		return
	}
	b = l.red.JSON(b)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
	case len(l.list) < maxEvents:
		l.list = append(l.list, b)
	default:
		l.omitted++
	}
}

func (l *eventLog) close() ([]json.RawMessage, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	return l.list, l.omitted
}

type auditRecord struct {
	Time    time.Time `json:"time"`
	Session string    `json:"session"`
	CallRecord
}

// Records returns the records kept since the last reset, and how many more
// were only counted.
func (d *Dispatcher) Records() (kept []CallRecord, omitted int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]CallRecord(nil), d.records...), d.omitted
}

// Observe has fn called with every record as it is kept or counted
// (redacted, as [Dispatcher.Records] returns it, also past
// Limits.MaxRecords), on the transport's goroutine once the call is
// answered, so before [Session.Run] returns; nil stops it. fn must not
// block for long: the call.s handler waits for it.
func (d *Dispatcher) Observe(fn func(CallRecord)) {
	d.mu.Lock()
	d.observe = fn
	d.mu.Unlock()
}

func (d *Dispatcher) resetRecords() {
	d.mu.Lock()
	d.records, d.omitted = nil, 0
	d.mu.Unlock()
}

// SetResult implements [gates.Results]: the session's result sink.
func (d *Dispatcher) SetResult(key, value string) {
	d.mu.Lock()
	d.results[key] = value
	d.mu.Unlock()
}

// Result returns the value a gate recorded under key (see [gates.Results]).
func (d *Dispatcher) Result(key string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.results[key]
	return v, ok
}

// Close waits up to grace for gates still running (their contexts must
// already be cancelled). A gate that ignores cancellation is left running,
// holding its max_concurrent slot, and reported.
func (d *Dispatcher) Close(grace time.Duration) error {
	done := make(chan struct{})
	go func() { d.gateWG.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-time.After(grace):
		return errors.New("bridge: close: a gate ignored cancellation and is still running")
	}
}

func appendMsg(b []byte, msg string) []byte {
	if len(b) > 0 && b[len(b)-1] != '\n' {
		b = append(b, '\n')
	}
	return append(append(b, msg...), '\n')
}

// capRecordArgs keeps at most max bytes of arguments in a record, marking
// what was cut (and naming the limit's setting: key("max_record_bytes")).
func capRecordArgs(args []string, max int, key func(string) string) []string {
	total := 0
	for i, a := range args {
		if total+len(a) > max {
			out := append(args[:i:i], lossless.Cut(a, max-total)+"…")
			return append(out, fmt.Sprintf("… %d more bytes cut (%s)", bytesFrom(args[i:])-(max-total), key("max_record_bytes")))
		}
		total += len(a)
	}
	return args
}

func bytesFrom(args []string) int {
	n := 0
	for _, a := range args {
		n += len(a)
	}
	return n
}

// capArgs is what a record keeps of args: 64 of 256 bytes each, redacted
// by red (nil: none) before they are cut, so that no cut leaves the first
// bytes of a secret.
func capArgs(args []string, red *secrets.Redactor) []string {
	n := min(len(args), 64)
	out := make([]string, n, n+1)
	for i := range n {
		a := red.String(args[i])
		if len(a) > 256 {
			a = lossless.Cut(a, 256) + "…"
		}
		out[i] = a
	}
	if len(args) > n {
		out = append(out, fmt.Sprintf("… %d more", len(args)-n))
	}
	return out
}

// capWriter keeps (or passes on, when streaming) the first max bytes
// written to it; it is safe for concurrent use.
type capWriter struct {
	mu      sync.Mutex
	to      io.Writer // nil: keep in b
	b       []byte
	n, max  int64
	dropped int64
}

func newCapWriter(max int64, to io.Writer) *capWriter { return &capWriter{max: max, to: to} }

func (c *capWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.max - c.n
	keep := p
	if int64(len(p)) > room {
		keep = p[:max(room, 0)]
		c.dropped += int64(len(p) - len(keep))
	}
	c.n += int64(len(keep))
	if len(keep) > 0 {
		if c.to != nil {
			// A transport that cannot keep up (a caller gone) loses the
			// rest; the gate is not failed for it.
			c.to.Write(keep)
		} else {
			c.b = append(c.b, keep...)
		}
	}
	return len(p), nil
}

func (c *capWriter) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.b...)
}

func (c *capWriter) Dropped() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped
}
