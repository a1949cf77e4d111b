package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/gatebridge/gatebridge/internal/hint"
	"github.com/gatebridge/gatebridge/internal/lossless"
	"github.com/gatebridge/gatebridge/sandbox"
)

// proc is one process of a connection.
type proc struct {
	c       *conn
	sb      *sbox
	id      string
	argv    []string
	cancel  context.CancelCauseFunc
	signals chan syscall.Signal
	stdin   *stdinQueue // nil: no stdin
	done    chan struct{}
	// released is closed when the process's session is gone too.
	released chan struct{}
	session  string // bridge session id (gate calls name it)

	mu          sync.Mutex
	seq         int64
	replay      []Chunk
	replayBytes int64
	outCap      *sandbox.Capture
	errCap      *sandbox.Capture
	changed     chan struct{} // closed and replaced on every chunk and at exit
	exited      bool
	exit        ProcessExitedParams
}

var signalNames = map[string]syscall.Signal{
	"INT": syscall.SIGINT, "TERM": syscall.SIGTERM, "KILL": syscall.SIGKILL, "HUP": syscall.SIGHUP,
}

// exitSignal names the signal an exit code 128+N says ended a process
// ("" when it does not).
func exitSignal(code int) string {
	for name, sig := range map[string]syscall.Signal{
		"INT": syscall.SIGINT, "TERM": syscall.SIGTERM, "KILL": syscall.SIGKILL, "HUP": syscall.SIGHUP,
		"PIPE": syscall.SIGPIPE, "QUIT": syscall.SIGQUIT, "ABRT": syscall.SIGABRT, "SEGV": syscall.SIGSEGV,
		"USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "ALRM": syscall.SIGALRM,
	} {
		if code == 128+int(sig) {
			return name
		}
	}
	return ""
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
		if sb.openErr == nil {
			if _, err := sb.workDir(p.Cwd); err != nil {
				c.mu.Unlock()
				return nil, err
			}
		}
	default:
	}
	ctx, cancel := context.WithCancelCause(c.ctx)
	pr := &proc{c: c, sb: sb, id: p.ProcessID, argv: p.Argv, cancel: cancel,
		signals: make(chan syscall.Signal, 8), done: make(chan struct{}), released: make(chan struct{}),
		outCap: sandbox.NewCapture(o.MaxRetainedBytes), errCap: sandbox.NewCapture(o.MaxRetainedBytes),
		changed: make(chan struct{})}
	var stdinR *io.PipeReader
	if p.Stdin {
		var w *io.PipeWriter
		stdinR, w = io.Pipe()
		pr.stdin = newStdinQueue(w, o.MaxStdinQueued)
	}
	c.procs[p.ProcessID] = pr
	c.running++
	c.mu.Unlock()

	return replier(func(reply func(any, error)) {
		run, err := pr.start(ctx, sb, &p, env, stdinR)
		if err != nil {
			pr.finish(ProcessExitedParams{ProcessID: pr.id, ExitCode: 125}, false)
			close(pr.released)
			reply(nil, err)
			return
		}
		reply(&ProcessStartResult{ProcessID: pr.id}, nil)
		run()
	}), nil
}

// start waits for the sandbox to be open and opens the process's session;
// run then runs the command to its end. The response goes out between the
// two, from this goroutine, while run starts the command.
func (pr *proc) start(ctx context.Context, sb *sbox, p *ProcessStartParams, env []string, stdin *io.PipeReader) (run func(), err error) {
	c, o := pr.c, pr.c.srv.opts
	select {
	case <-sb.ready:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	if sb.openErr != nil {
		return nil, errorf(CodeNotFound, "sandbox %q did not open: %v", sb.id, sb.openErr.Message)
	}
	dir, err := sb.workDir(p.Cwd)
	if err != nil {
		return nil, err
	}
	sb.mu.Lock()
	if sb.closed {
		sb.mu.Unlock()
		return nil, errorf(CodeNotFound, "sandbox %q is closing", sb.id)
	}
	sb.procs[pr.id] = pr
	sb.mu.Unlock()
	unlist := func() {
		sb.mu.Lock()
		delete(sb.procs, pr.id)
		sb.mu.Unlock()
	}

	ss, err := c.takeSession(sb)
	if err != nil {
		unlist()
		return nil, fmt.Errorf("open session: %w", err)
	}
	ss.owner.Store(pr)
	sess := ss.sess
	pr.session = sess.ID()
	spec := o.Process
	spec.Command = p.Argv
	spec.Env = sandbox.MergeEnv(sb.env, env)
	spec.Workspace, spec.Dir = sb.workspace, dir
	spec.WorkspaceWritable = sb.writable
	spec.Stdout, spec.Stderr = pr.writer("stdout"), pr.writer("stderr")
	spec.MaxOutput = 4096 // the backend's own capture is not used
	spec.Signals = pr.signals
	spec.UID, spec.GID = sb.uid, sb.gid
	if p.TimeoutMs > 0 {
		spec.Timeout = time.Duration(p.TimeoutMs) * time.Millisecond
	}
	if stdin != nil {
		spec.Stdin = stdin
	}
	c.mu.Lock()
	c.bySession[pr.session] = pr
	c.mu.Unlock()

	return func() {
		defer close(pr.released)
		defer unlist()
		res, runErr := sess.Run(ctx, sb.backend, spec)
		// Every call the command made has been answered: the exit can be
		// reported before the session is removed.
		defer func() {
			var err error
			housekeep(func() { err = sess.CloseWithin(housekeepRemoveTime) })
			if err != nil {
				o.Logf("gatebridge: serve: process %s: %v", pr.id, err)
			}
			c.mu.Lock()
			delete(c.bySession, pr.session)
			c.mu.Unlock()
		}()
		ex := ProcessExitedParams{ProcessID: pr.id}
		switch {
		case runErr != nil:
			ex.ExitCode = 125
			msg := "gatebridge: " + runErr.Error() + "\n"
			if h := hint.Of(runErr); h != "" {
				msg += "gatebridge: hint: " + h + "\n"
			}
			pr.writer("stderr").Write([]byte(msg))
		default:
			ex.ExitCode, ex.TimedOut, ex.Answer = res.ExitCode, res.TimedOut, res.Answer
			if res.Answer != nil {
				ex.AnswerBase64 = lossless.Bytes(*res.Answer)
			}
			if !res.TimedOut {
				ex.Signal = exitSignal(res.ExitCode)
			}
		}
		pr.finish(ex, true)
	}, nil
}

// finish records the exit, frees the running slot, keeps the process for
// wait/read/snapshot (the oldest exited ones beyond DefaultKeepExited are
// forgotten) and, when notify, sends process/exited after every output.
func (pr *proc) finish(ex ProcessExitedParams, notify bool) {
	c := pr.c
	pr.cancel(errExited)
	if pr.stdin != nil {
		pr.stdin.abort()
	}
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

var errExited = errors.New("the process exited")

// workDir turns process/start's cwd into a Spec.Dir: relative to the
// workspace, or absolute as commands see the workspace.
func (sb *sbox) workDir(cwd string) (string, error) {
	if cwd == "" {
		return "", nil
	}
	rel := cwd
	if filepath.IsAbs(cwd) {
		r, err := filepath.Rel(sb.inside, filepath.Clean(cwd))
		if err != nil || !filepath.IsLocal(r) && r != "." {
			return "", errorf(CodeInvalidParams, "invalid params: \"cwd\" %q is not inside the workspace (%s inside the sandbox)", cwd, sb.inside)
		}
		rel = r
	}
	if rel != "." && !filepath.IsLocal(rel) {
		return "", errorf(CodeInvalidParams, "invalid params: \"cwd\" %q leaves the workspace", cwd)
	}
	st, err := os.Stat(filepath.Join(sb.workspace, rel))
	if err != nil || !st.IsDir() {
		return "", errorf(CodeInvalidParams, "invalid params: \"cwd\" %q is not a directory of the workspace", cwd)
	}
	return rel, nil
}

// stop cancels the process (its run ends the way a timeout does).
func (p *proc) stop(cause error) { p.cancel(cause) }

// outWriter turns one stream of a process into chunks.
type outWriter struct {
	p      *proc
	stream string
}

func (p *proc) writer(stream string) io.Writer { return &outWriter{p, stream} }

// Write numbers the chunk, keeps it for process/read and the snapshot, and
// sends it as process/output; it blocks while the client does not read
// (back pressure on the command).
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
	if w.stream == "stdout" {
		p.outCap.Write(b)
	} else {
		p.errCap.Write(b)
	}
	close(p.changed)
	p.changed = make(chan struct{})
	p.c.notify(MethodProcessOutput, ProcessOutputParams{ProcessID: p.id, Seq: ch.Seq, Stream: w.stream, Chunk: ch.Chunk})
	return len(b), nil
}

// procParams are the params that name a process.
type procParams interface {
	ProcessWriteParams | ProcessIDParams | ProcessSignalParams | ProcessWaitParams | ProcessReadParams
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
	if err := p.stdin.write(q.Chunk); err != nil {
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
		p.stdin.close()
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
	select {
	case <-p.done:
		return nil, errorf(CodeNotFound, "process %q has exited", p.id)
	case p.signals <- sig:
		return struct{}{}, nil
	default:
		return nil, errorf(CodeLimit, "process %q has %d signals not yet delivered", p.id, cap(p.signals))
	}
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
	omitted := p.outCap.Dropped() + p.errCap.Dropped()
	return &ProcessSnapshotResult{Stdout: p.outCap.Bytes(), Stderr: p.errCap.Bytes(), Truncated: omitted > 0,
		OmittedBytes: omitted, ExitCode: p.exitCode(), Running: !p.exited}, nil
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
		res.Processes = append(res.Processes, ProcessInfo{ProcessID: p.id, SandboxID: p.sb.id, Argv: p.argv,
			Running: !p.exited, ExitCode: p.exitCode()})
		p.mu.Unlock()
	}
	sortProcs(res.Processes)
	return res, nil
}

// stdinQueue passes process/write chunks to a process in order without
// blocking the connection: up to max bytes wait for the process to read
// them; more is refused (-32003) until it does.
type stdinQueue struct {
	w      *io.PipeWriter
	max    int64
	mu     sync.Mutex
	queued int64
	chunks chan []byte
	closed bool
	once   sync.Once
}

func newStdinQueue(w *io.PipeWriter, max int64) *stdinQueue {
	q := &stdinQueue{w: w, max: max, chunks: make(chan []byte, 4096)}
	go func() {
		for b := range q.chunks {
			_, err := w.Write(b)
			q.mu.Lock()
			q.queued -= int64(len(b))
			q.mu.Unlock()
			if err != nil {
				for b := range q.chunks { // the process stopped reading
					q.mu.Lock()
					q.queued -= int64(len(b))
					q.mu.Unlock()
				}
				return
			}
		}
		w.Close()
	}()
	return q
}

func (q *stdinQueue) write(b []byte) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return errorf(CodeInvalidParams, "stdin is closed (process/closeStdin was sent, or the process exited)")
	}
	if q.queued+int64(len(b)) > q.max {
		return errorf(CodeLimit, "%d bytes of stdin wait for the process to read them (limit %d); write again later", q.queued, q.max)
	}
	select {
	case q.chunks <- b:
		q.queued += int64(len(b))
		return nil
	default:
		return errorf(CodeLimit, "%d stdin chunks wait for the process to read them; write again later", cap(q.chunks))
	}
}

func (q *stdinQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed = true
		close(q.chunks)
	}
}

// abort ends stdin when the process has exited.
func (q *stdinQueue) abort() {
	q.close()
	q.w.CloseWithError(io.ErrClosedPipe)
}

func sortProcs(ps []ProcessInfo) {
	sort.Slice(ps, func(i, j int) bool { return ps[i].ProcessID < ps[j].ProcessID })
}
