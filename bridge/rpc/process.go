package rpc

import (
	"context"
	"encoding/json"
	"io"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/internal/lossless"
	"github.com/gatebridge/gatebridge/sandbox"
)

// proc is one process of a connection: its id, what process/read
// replays, and the control plane's process once started.
type proc struct {
	c       *conn
	sbID    string
	id      string
	argv    []string
	signals chan syscall.Signal
	stdin   *control.Stdin // nil: no stdin
	done    chan struct{}
	tty     bool // on a terminal: process/resize applies

	mu          sync.Mutex
	cp          *control.Process // nil until started
	size        *sandbox.TTYSize // a resize before cp, applied once started
	seq         int64
	replay      []Chunk
	replayBytes int64
	changed     chan struct{} // closed and replaced on every chunk and at exit
	exited      bool
	exit        ProcessExitedParams
}

var signalNames = map[string]syscall.Signal{
	"INT": syscall.SIGINT, "TERM": syscall.SIGTERM, "KILL": syscall.SIGKILL, "HUP": syscall.SIGHUP,
}

func (c *conn) processStart(params json.RawMessage) (any, error) {
	var p ProcessStartParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	if err := checkID("processId", p.ProcessID); err != nil {
		return nil, err
	}
	if err := required("sandboxId", p.SandboxID); err != nil {
		return nil, err
	}
	if len(p.Argv) == 0 || p.Argv[0] == "" {
		return nil, errorf(CodeInvalidParams, "invalid params: \"argv\" must hold at least the command name")
	}
	if p.TimeoutMs < 0 {
		return nil, errorf(CodeInvalidParams, "invalid params: \"timeoutMs\" must not be negative")
	}
	if p.TTY != nil {
		if _, err := ttySize("tty.", p.TTY.Rows, p.TTY.Cols); err != nil {
			return nil, err
		}
	}
	env, err := envList("env", p.Env)
	if err != nil {
		return nil, err
	}
	o := c.srv.opts

	// Reserve the id (and the stdin queue, and the signal channel) now,
	// on the read loop: the requests after this one may name it.
	c.mu.Lock()
	sb := c.sandboxes[p.SandboxID]
	switch {
	case sb == nil:
		c.mu.Unlock()
		return nil, errorf(CodeNotFound, "no open sandbox %q (sandbox/open it first)", p.SandboxID)
	case c.procs[p.ProcessID] != nil:
		c.mu.Unlock()
		return nil, errorf(CodeConflict, "processId %q is already in use on this connection", p.ProcessID)
	case c.running >= o.MaxProcesses:
		c.mu.Unlock()
		return nil, errorf(CodeLimit, "%d processes are running (limit maxProcesses); wait for one to exit", c.running)
	}
	select {
	case <-sb.ready: // open: check the cwd now (else when it is)
		if sb.cs != nil {
			if _, err := sb.cs.WorkDir(p.Cwd); err != nil {
				c.mu.Unlock()
				return nil, err
			}
		}
	default:
	}
	pr := &proc{c: c, sbID: sb.id, id: p.ProcessID, argv: p.Argv, signals: control.NewSignals(),
		done: make(chan struct{}), changed: make(chan struct{}), tty: p.TTY != nil}
	if p.Stdin {
		pr.stdin = c.srv.host.NewStdin()
	}
	c.procs[p.ProcessID] = pr
	c.running++
	c.mu.Unlock()

	return replier(func(reply func(any, error)) {
		cp, err := pr.start(sb, &p, env)
		if err != nil {
			if pr.stdin != nil {
				pr.stdin.Abort()
			}
			pr.finish(ProcessExitedParams{ProcessID: pr.id, ExitCode: 125, GateCalls: []GateCallReport{}}, false)
			reply(nil, err)
			return
		}
		reply(&ProcessStartResult{ProcessID: pr.id}, nil)
		cp.Run()
	}), nil
}

// start waits for the sandbox to be open and prepares the process (its
// session); Run then runs the command to its end. The response goes out
// between the two, from this goroutine.
func (pr *proc) start(sb *sbox, p *ProcessStartParams, env []string) (*control.Process, error) {
	c := pr.c
	select {
	case <-sb.ready:
	case <-c.ctx.Done():
		return nil, context.Cause(c.ctx)
	}
	if sb.openErr != nil {
		return nil, errorf(CodeNotFound, "sandbox %q did not open: %v", sb.id, sb.openErr.Message)
	}
	spec := control.ProcessSpec{ID: pr.id, Argv: p.Argv, Env: env, Cwd: p.Cwd, Signals: pr.signals,
		Stdout: pr.writer("stdout"), Stderr: pr.writer("stderr"),
		Timeout: time.Duration(p.TimeoutMs) * time.Millisecond,
		OnExit: func(x control.Exit) {
			ex := ProcessExitedParams{ProcessID: pr.id, ExitCode: x.Code, Signal: x.Signal, TimedOut: x.TimedOut, Answer: x.Answer,
				GateCalls: gateCallReports(pr.id, x.GateCalls), GateCallsDropped: x.GateCallsDropped}
			if x.Answer != nil {
				ex.AnswerBase64 = lossless.Bytes(*x.Answer)
			}
			pr.finish(ex, true)
		}}
	if pr.stdin != nil {
		spec.Stdin = pr.stdin
	}
	if p.ReportGateCalls {
		spec.OnGateCall = func(r bridge.CallRecord) {
			pr.mu.Lock() // in order with process/output and before process/exited
			c.notify(MethodProcessGateCall, ProcessGateCallParams{ProcessID: pr.id, Call: gateCallReport(pr.id, r)})
			pr.mu.Unlock()
		}
	}
	if p.TTY != nil {
		spec.TTY = &sandbox.TTYSize{Rows: uint16(p.TTY.Rows), Cols: uint16(p.TTY.Cols)}
	}
	spec.Arg0 = p.Arg0
	cp, err := sb.cs.Prepare(c.ctx, spec)
	if err != nil {
		return nil, err
	}
	pr.mu.Lock()
	pr.cp = cp
	if pr.size != nil {
		cp.Resize(*pr.size)
	}
	pr.mu.Unlock()
	return cp, nil
}

// finish records the exit, frees the running slot, keeps the process for
// wait/read/snapshot (the oldest exited ones beyond DefaultKeepExited are
// forgotten) and, when notify, sends process/exited after every output.
func (pr *proc) finish(ex ProcessExitedParams, notify bool) {
	c := pr.c
	c.mu.Lock()
	c.running--
	c.exited = append(c.exited, pr.id)
	if n := len(c.exited) - DefaultKeepExited; n > 0 {
		for _, id := range c.exited[:n] {
			delete(c.procs, id)
		}
		c.exited = c.exited[n:]
	}
	c.mu.Unlock()
	pr.mu.Lock()
	pr.exited, pr.exit = true, ex
	close(pr.changed)
	pr.changed = make(chan struct{})
	if notify {
		c.notify(MethodProcessExited, ex) // under pr.mu: after every process/output
	}
	pr.mu.Unlock()
	close(pr.done)
}

// outWriter turns one stream of a process into chunks.
type outWriter struct {
	p      *proc
	stream string
}

func (p *proc) writer(stream string) io.Writer { return &outWriter{p, stream} }

// Write numbers the chunk, keeps it for process/read, and sends it as
// process/output; it blocks while the client does not read (back
// pressure on the command).
func (w *outWriter) Write(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	p := w.p
	max := p.c.srv.opts.MaxReplayBytes
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	ch := Chunk{Seq: p.seq, Stream: w.stream, Chunk: append([]byte(nil), b...)}
	p.replay = append(p.replay, ch)
	p.replayBytes += int64(len(b))
	for len(p.replay) > 1 && p.replayBytes > max {
		p.replayBytes -= int64(len(p.replay[0].Chunk))
		p.replay[0] = Chunk{}
		p.replay = p.replay[1:]
	}
	close(p.changed)
	p.changed = make(chan struct{})
	p.c.notify(MethodProcessOutput, ProcessOutputParams{ProcessID: p.id, Seq: ch.Seq, Stream: w.stream, Chunk: ch.Chunk})
	return len(b), nil
}

// procParams are the params that name a process.
type procParams interface {
	ProcessWriteParams | ProcessIDParams | ProcessSignalParams | ProcessWaitParams | ProcessReadParams | ProcessResizeParams
}

// procRequest decodes the params of a request about one process and looks
// the process up.
func procRequest[T procParams](c *conn, params json.RawMessage) (*T, *proc, error) {
	q := new(T)
	if err := decode(params, q); err != nil {
		return nil, nil, err
	}
	var id string
	switch v := any(q).(type) {
	case *ProcessWriteParams:
		id = v.ProcessID
	case *ProcessIDParams:
		id = v.ProcessID
	case *ProcessSignalParams:
		id = v.ProcessID
	case *ProcessWaitParams:
		id = v.ProcessID
	case *ProcessReadParams:
		id = v.ProcessID
	case *ProcessResizeParams:
		id = v.ProcessID
	}
	p, err := c.lookupProc(id)
	if err != nil {
		return nil, nil, err
	}
	return q, p, nil
}

func (c *conn) lookupProc(processID string) (*proc, error) {
	if err := required("processId", processID); err != nil {
		return nil, err
	}
	c.mu.Lock()
	p := c.procs[processID]
	c.mu.Unlock()
	if p == nil {
		return nil, errorf(CodeNotFound, "no process %q on this connection", processID)
	}
	return p, nil
}

func (c *conn) processWrite(params json.RawMessage) (any, error) {
	q, p, err := procRequest[ProcessWriteParams](c, params)
	if err != nil {
		return nil, err
	}
	if p.stdin == nil {
		return nil, errorf(CodeInvalidParams, "process %q was started without stdin (process/start \"stdin\": true)", p.id)
	}
	if err := p.stdin.Send(q.Chunk); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

func (c *conn) processCloseStdin(params json.RawMessage) (any, error) {
	_, p, err := procRequest[ProcessIDParams](c, params)
	if err != nil {
		return nil, err
	}
	if p.stdin != nil {
		p.stdin.Close()
	}
	return struct{}{}, nil
}

func (c *conn) processSignal(params json.RawMessage) (any, error) {
	q, p, err := procRequest[ProcessSignalParams](c, params)
	if err != nil {
		return nil, err
	}
	sig, ok := signalNames[q.Signal]
	if !ok {
		return nil, errorf(CodeInvalidParams, "invalid params: \"signal\" %q: use INT, TERM, KILL or HUP", q.Signal)
	}
	if err := control.SendSignal(p.signals, p.done, p.id, sig); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// ttySize checks a terminal size from the protocol (prefix: the
// fields' parent, "tty." in process/start).
func ttySize(prefix string, rows, cols int) (sandbox.TTYSize, error) {
	for _, f := range []struct {
		name string
		v    int
	}{{"rows", rows}, {"cols", cols}} {
		if f.v < 1 || f.v > 65535 {
			return sandbox.TTYSize{}, errorf(CodeInvalidParams, "invalid params: %q must be 1-65535, not %d", prefix+f.name, f.v)
		}
	}
	return sandbox.TTYSize{Rows: uint16(rows), Cols: uint16(cols)}, nil
}

func (c *conn) processResize(params json.RawMessage) (any, error) {
	q, p, err := procRequest[ProcessResizeParams](c, params)
	if err != nil {
		return nil, err
	}
	if !p.tty {
		return nil, errorf(CodeInvalidParams, "process %q was started without a terminal (process/start \"tty\")", p.id)
	}
	size, err := ttySize("", q.Rows, q.Cols)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited {
		return nil, errorf(CodeNotFound, "process %q has exited", p.id)
	}
	if p.cp == nil { // still starting: applied once it has
		p.size = &size
		return struct{}{}, nil
	}
	if err := p.cp.Resize(size); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// exitCode is the exit code while p.mu is held (nil while running).
func (p *proc) exitCode() *int {
	if !p.exited {
		return nil
	}
	code := p.exit.ExitCode
	return &code
}

func (c *conn) processWait(params json.RawMessage) (any, error) {
	q, p, err := procRequest[ProcessWaitParams](c, params)
	if err != nil {
		return nil, err
	}
	return later(func() (any, error) {
		var timeout <-chan time.Time
		if q.TimeoutMs > 0 {
			t := time.NewTimer(time.Duration(q.TimeoutMs) * time.Millisecond)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-p.done:
		case <-timeout:
		case <-c.ctx.Done():
			return nil, context.Cause(c.ctx)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.exited {
			return &ProcessWaitResult{Running: true}, nil
		}
		return &ProcessWaitResult{ExitCode: p.exitCode(), Signal: p.exit.Signal, TimedOut: p.exit.TimedOut}, nil
	}), nil
}

func (c *conn) processRead(params json.RawMessage) (any, error) {
	q, p, err := procRequest[ProcessReadParams](c, params)
	if err != nil {
		return nil, err
	}
	if q.MaxBytes <= 0 || q.MaxBytes > c.srv.opts.MaxReplayBytes {
		q.MaxBytes = c.srv.opts.MaxReplayBytes
	}
	if q.WaitMs <= 0 {
		return p.read(q, nil)
	}
	return later(func() (any, error) {
		t := time.NewTimer(time.Duration(q.WaitMs) * time.Millisecond)
		defer t.Stop()
		return p.read(q, t.C)
	}), nil
}

// read returns the chunks after q.AfterSeq, waiting until deadline for one
// when there is none yet (nil: not at all).
func (p *proc) read(q *ProcessReadParams, deadline <-chan time.Time) (any, error) {
	c := p.c
	for {
		p.mu.Lock()
		res := &ProcessReadResult{Chunks: []Chunk{}, Exited: p.exited, ExitCode: p.exitCode(), NextSeq: p.seq + 1, FirstSeq: p.seq + 1}
		if len(p.replay) > 0 {
			res.FirstSeq = p.replay[0].Seq
		}
		var n int64
		for _, ch := range p.replay {
			if ch.Seq <= q.AfterSeq {
				continue
			}
			if n > 0 && n+int64(len(ch.Chunk)) > q.MaxBytes {
				break
			}
			res.Chunks = append(res.Chunks, ch)
			n += int64(len(ch.Chunk))
		}
		changed := p.changed
		p.mu.Unlock()
		if len(res.Chunks) > 0 || res.Exited || deadline == nil {
			return res, nil
		}
		select {
		case <-changed:
		case <-deadline:
			deadline = nil
		case <-c.ctx.Done():
			return nil, context.Cause(c.ctx)
		}
	}
}

func (c *conn) processSnapshot(params json.RawMessage) (any, error) {
	_, p, err := procRequest[ProcessIDParams](c, params)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	res := &ProcessSnapshotResult{Stdout: []byte{}, Stderr: []byte{}, ExitCode: p.exitCode(), Running: !p.exited}
	if p.cp != nil {
		s := p.cp.Snapshot()
		res.Stdout, res.Stderr, res.OmittedBytes, res.Truncated = s.Stdout, s.Stderr, s.OmittedBytes, s.OmittedBytes > 0
	}
	return res, nil
}

func (c *conn) processList(params json.RawMessage) (any, error) {
	if err := decode(params, &struct{}{}); err != nil {
		return nil, err
	}
	c.mu.Lock()
	ps := make([]*proc, 0, len(c.procs))
	for _, p := range c.procs {
		ps = append(ps, p)
	}
	c.mu.Unlock()
	res := &ProcessListResult{Processes: []ProcessInfo{}}
	for _, p := range ps {
		p.mu.Lock()
		res.Processes = append(res.Processes, ProcessInfo{ProcessID: p.id, SandboxID: p.sbID, Argv: p.argv,
			Running: !p.exited, ExitCode: p.exitCode()})
		p.mu.Unlock()
	}
	sortProcs(res.Processes)
	return res, nil
}

func sortProcs(ps []ProcessInfo) {
	sort.Slice(ps, func(i, j int) bool { return ps[i].ProcessID < ps[j].ProcessID })
}

// gateCallReport is a call record of process procID (redacted by the
// session) on the wire; its callId is the one gate/call and
// approval/request give the call.
func gateCallReport(procID string, r bridge.CallRecord) GateCallReport {
	return GateCallReport{CallID: procID + ":" + r.ID, Gate: r.Gate, GateBase64: r.GateBase64, Args: r.Args, ArgsBase64: r.ArgsBase64, ExitCode: r.ExitCode,
		Decision: string(r.Decision), DecidedBy: r.DecidedBy, DurationMs: r.DurationMS, BytesIn: r.BytesIn, BytesOut: r.BytesOut,
		Error: r.Error, Events: r.Events, EventsOmitted: r.EventsOmitted}
}

func gateCallReports(procID string, rs []bridge.CallRecord) []GateCallReport {
	out := make([]GateCallReport, len(rs))
	for i, r := range rs {
		out[i] = gateCallReport(procID, r)
	}
	return out
}
