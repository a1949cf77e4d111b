package control

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/bridge/cmdpolicy"
	"github.com/gatebridge/gatebridge/internal/hint"
	"github.com/gatebridge/gatebridge/sandbox"
)

// ProcessSpec is what Start runs.
type ProcessSpec struct {
	// ID names the process in gate calls and approvals.
	ID string
	// Argv is the command; Script, when Argv is empty, is a shell
	// command line run with /bin/sh -c.
	Argv   []string
	Script string
	// Env is added to the sandbox's (KEY=VALUE).
	Env []string
	// Cwd is relative to the workspace, or absolute as commands see it
	// ("": the workspace).
	Cwd string
	// Stdin is the command's stdin (nil: none). With OpenStdin (or a
	// *Stdin from Host.NewStdin, made before the process, as a front
	// end that takes writes before the start does) the caller feeds it
	// through Process.Write and CloseStdin.
	Stdin     io.Reader
	OpenStdin bool
	// Signals, when set, is the channel Signal sends on (SendSignal
	// before the start), else Start makes one.
	Signals chan syscall.Signal
	// Stdout and Stderr receive the output as it comes (nil: only the
	// snapshot keeps it). A Write that blocks holds up the command.
	Stdout, Stderr io.Writer
	// Timeout ends the command (TERM, then KILL; exit 124); 0 means
	// Options.Process.Timeout.
	Timeout time.Duration
	// OnExit, when set, is called once with the exit after every Write
	// to Stdout and Stderr, before the process's session is removed
	// (Wait returns after OnExit).
	OnExit func(Exit)
	// OnGateCall, when set, is called with the record of each gate call
	// the command makes (redacted), once the call is answered, before
	// OnExit; it must not block for long (the call's handler waits).
	OnGateCall func(bridge.CallRecord)
	// TTY, when set, runs the command on a pseudo-terminal of that size
	// (a backend that cannot is refused, KindInvalid): its output is one
	// stream, Stdout; Process.Resize changes the size.
	TTY *sandbox.TTYSize
	// Arg0, when set, is the argv[0] the command sees (a backend that
	// cannot is refused, KindInvalid).
	Arg0 string
}

// Exit is how a process ended.
type Exit struct {
	Code     int
	Signal   string // the signal an exit 128+N says ended it ("": none)
	TimedOut bool
	Answer   *string // the command's answer (gb_answer), if any
	// Err is why the command could not run (then Code is 125), or why
	// it was not started: a command the policy marks ask that was not
	// allowed (then Code is 126, and Err wraps a *cmdpolicy.DeniedError).
	Err error
	// GateCalls are the records of the gate calls the command made, in
	// order, secrets redacted: the first Options.MaxGateCalls (and at
	// most bridge.limits.max_records); GateCallsDropped counts the rest.
	GateCalls        []bridge.CallRecord
	GateCallsDropped int
}

// Process is a command running in a sandbox.
type Process struct {
	sb       *Sandbox
	id       string
	argv     []string
	cancel   context.CancelCauseFunc
	signals  chan syscall.Signal
	stdin    *Stdin // nil: not OpenStdin
	done     chan struct{}
	released chan struct{} // closed when its session is gone too
	session  string
	run      func()
	resize   chan sandbox.TTYSize // nil: not on a terminal
	ask      *cmdpolicy.Result    // the policy says ask: Run asks before the start

	mu     sync.Mutex
	outCap *sandbox.Capture
	errCap *sandbox.Capture
	exited bool
	exit   Exit
}

// ID is the process's id; Sandbox its sandbox.
func (p *Process) ID() string        { return p.id }
func (p *Process) Sandbox() *Sandbox { return p.sb }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Start runs spec in the sandbox: it opens the process's session (the
// spare one, ready ahead) and starts the command, which runs until it
// exits, its timeout, ctx's end or the sandbox's Close.
func (sb *Sandbox) Start(ctx context.Context, spec ProcessSpec) (*Process, error) {
	p, err := sb.Prepare(ctx, spec)
	if err != nil {
		return nil, err
	}
	go p.Run()
	return p, nil
}

// Prepare is Start up to the command's start: Run starts it, on the
// caller's goroutine, and returns at its end. A front end that must
// answer between the two (JSON-RPC's response precedes the output)
// calls them in turn; others call Start.
func (sb *Sandbox) Prepare(ctx context.Context, spec ProcessSpec) (*Process, error) {
	o := sb.h.opts
	argv := spec.Argv
	if len(argv) == 0 && spec.Script != "" {
		argv = []string{"/bin/sh", "-c", spec.Script}
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, invalid("argv", "%q must hold at least the command name", "argv")
	}
	if spec.Timeout < 0 {
		return nil, invalid("timeoutMs", "%q must not be negative", "timeoutMs")
	}
	// Before anything starts; an ask is asked in Run, after the caller's
	// reply (process/start answers at once, and its connection answers
	// the question).
	ask, err := sb.h.checkCommand(argv, sandbox.MergeEnv(sb.env, spec.Env))
	if err != nil {
		return nil, err
	}
	if err := checkTerminal(sb.backend, spec); err != nil {
		return nil, err
	}
	dir, err := sb.WorkDir(spec.Cwd)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithCancelCause(ctx)
	p := &Process{sb: sb, id: spec.ID, argv: argv, cancel: cancel, signals: spec.Signals, done: make(chan struct{}), released: make(chan struct{}), ask: ask,
		outCap: sandbox.NewCapture(o.MaxRetainedBytes), errCap: sandbox.NewCapture(o.MaxRetainedBytes)}
	if p.signals == nil {
		p.signals = NewSignals()
	}
	if spec.TTY != nil {
		p.resize = make(chan sandbox.TTYSize, 1)
	}
	sb.mu.Lock()
	if sb.closed {
		sb.mu.Unlock()
		cancel(nil)
		return nil, errorf(KindNotFound, "sandbox %q is closing", sb.id)
	}
	if err := sb.countCommandLocked(); err != nil {
		sb.mu.Unlock()
		cancel(nil)
		return nil, err
	}
	sb.procs[p] = true
	sb.mu.Unlock()
	unlist := func() {
		sb.mu.Lock()
		delete(sb.procs, p)
		sb.mu.Unlock()
	}
	ss, err := sb.takeSession()
	if err != nil {
		unlist()
		cancel(nil)
		return nil, fmt.Errorf("open session: %w", err)
	}
	ss.owner.Store(p)
	sess := ss.sess
	p.session = sess.ID()
	if spec.OnGateCall != nil {
		sess.Dispatcher().Observe(spec.OnGateCall)
	}
	pspec := o.Process
	pspec.Command = argv
	pspec.Env = sandbox.MergeEnv(sb.env, spec.Env)
	pspec.Workspace, pspec.Dir = sb.workspace, dir
	pspec.WorkspaceWritable = sb.writable
	pspec.Stdout = &capWriter{p, p.outCap, spec.Stdout}
	pspec.Stderr = &capWriter{p, p.errCap, spec.Stderr}
	pspec.MaxOutput = 4096 // the backend's own capture is not used
	pspec.Signals = p.signals
	pspec.UID, pspec.GID = sb.uid, sb.gid
	pspec.TTY, pspec.Resize, pspec.Arg0 = spec.TTY, p.resize, spec.Arg0
	if spec.Timeout > 0 {
		pspec.Timeout = spec.Timeout
	}
	if spec.OpenStdin && spec.Stdin == nil {
		spec.Stdin = sb.h.NewStdin()
	}
	if in, ok := spec.Stdin.(*Stdin); ok {
		p.stdin = in
	}
	if spec.Stdin != nil {
		pspec.Stdin = spec.Stdin
	}
	h := sb.h
	h.mu.Lock()
	h.bySession[p.session] = p
	h.mu.Unlock()

	p.run = func() {
		defer close(p.released)
		defer unlist()
		var res *bridge.Result
		var runErr error
		refused := p.askStart(pctx) // nil unless the policy asks and the answer is not allow
		if refused == nil {
			res, runErr = sess.Run(pctx, sb.backend, pspec)
		}
		// Every call the command made has been answered: the exit can be
		// reported before the session is removed.
		defer func() {
			var err error
			housekeep(func() { err = sess.CloseWithin(housekeepRemoveTime) })
			if err != nil {
				o.Logf("gatebridge: serve: process %s: %v", p.id, err)
			}
			h.mu.Lock()
			delete(h.bySession, p.session)
			h.mu.Unlock()
		}()
		var ex Exit
		switch {
		case refused != nil:
			ex.Code, ex.Err = 126, refused
			hn := hint.Of(refused)
			if _, ok := cmdpolicy.IsDenied(refused); ok && hn == "" {
				// Asked and answered no (the runtime, a person): not the
				// policy's "no one to ask" hint.
				hn = "the answer to the question decided; `gatebridge policy check -- COMMAND...` shows which rule asks"
			}
			pspec.Stderr.Write([]byte("gatebridge: " + refused.Error() + "\ngatebridge: hint: " + hn + "\n"))
		case runErr != nil:
			ex.Code, ex.Err = 125, runErr
			msg := "gatebridge: " + runErr.Error() + "\n"
			if hn := hint.Of(runErr); hn != "" {
				msg += "gatebridge: hint: " + hn + "\n"
			}
			pspec.Stderr.Write([]byte(msg))
		default:
			ex.Code, ex.TimedOut, ex.Answer = res.ExitCode, res.TimedOut, res.Answer
			if !res.TimedOut {
				ex.Signal = ExitSignal(res.ExitCode)
			}
		}
		ex.GateCalls, ex.GateCallsDropped = gateCalls(sess, res, o.MaxGateCalls)
		p.finish(ex, spec.OnExit)
	}
	return p, nil
}

// askStart asks the sandbox's Approver about the command when the policy
// marks it ask (p.ask), before anything of it starts: nil to start it,
// else the refusal. A signal sent meanwhile (Process.Signal) withdraws
// the question, and the command does not start; one that comes with the
// answer is kept for the command.
func (p *Process) askStart(ctx context.Context) error {
	if p.ask == nil {
		return nil
	}
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop, got := make(chan struct{}), make(chan syscall.Signal, 1)
	go func() {
		select {
		case sig := <-p.signals:
			cancel(fmt.Errorf("a signal (%v) came before the command started", sig))
			got <- sig
		case <-stop:
			got <- 0
		}
	}()
	err := p.sb.h.decider.DecideCommand(actx, p.argv, *p.ask, p.sb.session, p.sb.asker(p))
	close(stop)
	if sig := <-got; sig != 0 && err == nil {
		select { // allowed as the signal came: the command gets it
		case p.signals <- sig:
		default:
		}
	}
	return err
}

// Run runs a prepared process's command to its end (once).
func (p *Process) Run() {
	run := p.run
	p.run = nil
	if run != nil {
		run()
	}
}

func (p *Process) finish(ex Exit, onExit func(Exit)) {
	p.cancel(errExited)
	if p.stdin != nil {
		p.stdin.abort()
	}
	p.mu.Lock()
	p.exited, p.exit = true, ex
	p.mu.Unlock()
	if onExit != nil {
		onExit(ex)
	}
	close(p.done)
}

var errExited = errors.New("the process exited")

// capWriter keeps a stream's head and tail for the snapshot and passes
// it on.
type capWriter struct {
	p   *Process
	cap *sandbox.Capture
	w   io.Writer
}

func (w *capWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	w.cap.Write(b)
	w.p.mu.Unlock()
	if w.w == nil {
		return len(b), nil
	}
	return w.w.Write(b)
}

// ExitSignal names the signal an exit code 128+N says ended a process
// ("" when it does not).
func ExitSignal(code int) string {
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

// Signal delivers sig to the command (the backend forwards it).
func (p *Process) Signal(sig syscall.Signal) error { return SendSignal(p.signals, p.done, p.id, sig) }

// NewSignals is a channel for ProcessSpec.Signals.
func NewSignals() chan syscall.Signal { return make(chan syscall.Signal, 8) }

// SendSignal sends sig on signals (ProcessSpec.Signals) unless done (the
// process with this id has exited) or the signals not yet delivered
// fill the channel.
func SendSignal(signals chan syscall.Signal, done <-chan struct{}, id string, sig syscall.Signal) error {
	select {
	case <-done: // first: the channel may have room after the exit too
		return errorf(KindNotFound, "process %q has exited", id)
	default:
	}
	select {
	case signals <- sig:
		return nil
	default:
		return errorf(KindLimit, "process %q has %d signals not yet delivered", id, cap(signals))
	}
}

// Write queues b for the command's stdin (ProcessSpec.OpenStdin); up to
// Options.MaxStdinQueued bytes wait for it to read them, more is a
// KindLimit error until it does.
func (p *Process) Write(b []byte) error {
	if p.stdin == nil {
		return errorf(KindInvalid, "process %q was started without stdin", p.id)
	}
	return p.stdin.Send(b)
}

// CloseStdin ends the command's stdin once what was written is read.
func (p *Process) CloseStdin() {
	if p.stdin != nil {
		p.stdin.Close()
	}
}

// Wait waits for the exit, or ctx's end.
func (p *Process) Wait(ctx context.Context) (Exit, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return Exit{}, context.Cause(ctx)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit, nil
}

// Snapshot is the retained output and the state of a process.
type Snapshot struct {
	Stdout, Stderr []byte
	OmittedBytes   int64 // dropped between the retained head and tail
	Running        bool
	Exit           Exit // when not Running
}

// Snapshot returns what the process wrote (head and tail of each
// stream, Options.MaxRetainedBytes) and whether it still runs.
func (p *Process) Snapshot() Snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Snapshot{Stdout: p.outCap.Bytes(), Stderr: p.errCap.Bytes(),
		OmittedBytes: p.outCap.Dropped() + p.errCap.Dropped(), Running: !p.exited, Exit: p.exit}
}

// Stdin passes Send chunks to a process in order without blocking the
// sender: up to Options.MaxStdinQueued bytes wait for the process to read
// them; more is refused (KindLimit) until it does. It is the process's
// io.Reader (ProcessSpec.Stdin).
type Stdin struct {
	r      *io.PipeReader
	w      *io.PipeWriter
	max    int64
	mu     sync.Mutex
	queued int64
	chunks chan []byte
	closed bool
}

// NewStdin returns a stdin for ProcessSpec.Stdin that takes chunks
// before the process starts.
func (h *Host) NewStdin() *Stdin {
	r, w := io.Pipe()
	q := &Stdin{r: r, w: w, max: h.opts.MaxStdinQueued, chunks: make(chan []byte, 4096)}
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

func (q *Stdin) Read(b []byte) (int, error) { return q.r.Read(b) }

// Send queues b.
func (q *Stdin) Send(b []byte) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return errorf(KindInvalid, "stdin is closed (process/closeStdin was sent, or the process exited)")
	}
	if q.queued+int64(len(b)) > q.max {
		return errorf(KindLimit, "%d bytes of stdin wait for the process to read them (limit %d); write again later", q.queued, q.max)
	}
	select {
	case q.chunks <- b:
		q.queued += int64(len(b))
		return nil
	default:
		return errorf(KindLimit, "%d stdin chunks wait for the process to read them; write again later", cap(q.chunks))
	}
}

// Close ends stdin once the queued chunks are read.
func (q *Stdin) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed = true
		close(q.chunks)
	}
}

// abort ends stdin when the process has exited (or never starts).
func (q *Stdin) abort() {
	q.Close()
	q.w.CloseWithError(io.ErrClosedPipe)
}

// Abort ends a stdin whose process never started.
func (q *Stdin) Abort() { q.abort() }

// checkTerminal refuses a terminal (spec.TTY) or an argv[0] (spec.Arg0)
// the sandbox's backend cannot give, naming it, before anything starts.
func checkTerminal(b sandbox.Backend, spec ProcessSpec) error {
	if spec.TTY != nil && (spec.TTY.Rows == 0 || spec.TTY.Cols == 0) {
		return invalid("tty", "%q needs rows and cols of at least 1", "tty")
	}
	field := "tty"
	err := error(nil)
	if spec.TTY != nil {
		err = sandbox.TTYSupport(b)
	}
	if err == nil && spec.Arg0 != "" {
		field, err = "arg0", sandbox.Arg0Support(b)
	}
	if err == nil {
		return nil
	}
	e := invalid(field, "%q: backend %q cannot: %v", field, b.Name(), err)
	e.Help, e.Err = hint.Of(err), err
	return e
}

// Resize changes the size of the process's terminal (ProcessSpec.TTY);
// the command gets SIGWINCH. Only the latest size waits to be applied.
func (p *Process) Resize(size sandbox.TTYSize) error {
	if p.resize == nil {
		return errorf(KindInvalid, "process %q was started without a terminal (tty)", p.id)
	}
	if size.Rows == 0 || size.Cols == 0 {
		return invalid("rows", "a terminal needs rows and cols of at least 1")
	}
	select {
	case <-p.done:
		return errorf(KindNotFound, "process %q has exited", p.id)
	default:
	}
	for {
		select {
		case p.resize <- size:
			return nil
		default:
		}
		select { // drop the size not yet applied: this one replaces it
		case <-p.resize:
		default:
		}
	}
}

// HasTTY says whether the process runs on a terminal.
func (p *Process) HasTTY() bool { return p.resize != nil }
