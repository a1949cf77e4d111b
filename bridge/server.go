package bridge

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/internal/hostilefs"
	"github.com/gatebridge/gatebridge/internal/lossless"
)

// errCallerGone cancels a gate whose wrapper went away (killed, or gave up
// waiting): no one will read its answer.
var errCallerGone = fmt.Errorf("cancelled: the caller went away (its wrapper exited while the gate ran): %w", context.Canceled)

// callerCheck is how often a running call's wrapper is checked for, so
// that a gate is cancelled within 100 ms of its caller going away.
const callerCheck = 50 * time.Millisecond

// server is the mailbox front end of a [Dispatcher]: it notices the calls a
// sandbox publishes in calls/ (events from the shared watcher, plus
// rescans), claims each once, reads it under the limits, dispatches it, and
// writes the answer back. It is the only reader of the hostile mailbox.
type server struct {
	cfg       *Config
	box       *box
	d         *Dispatcher
	callsPath string
	mode      WatchMode // effective: events or poll

	ctx    context.Context // cancelled by close: stops the loop and gates
	cancel context.CancelFunc
	loopWG sync.WaitGroup
	workWG sync.WaitGroup

	kick    chan struct{}
	drainCh chan chan struct{}
	pmu     sync.Mutex
	pending map[string]struct{}
	rescan  bool

	queue chan *claimed

	mu        sync.Mutex
	state     map[string]uint8 // id → stateWatched | stateDone | stateInvalid
	watches   map[string]fdWatch
	claimedN  int
	inflight  int
	idle      *sync.Cond
	ignored   int
	runCtx    context.Context // parent of the calls' contexts, replaced per run
	runCancel context.CancelCauseFunc
	respBytes map[string]int64 // unacknowledged response bytes per call
	heldBytes int64            // their sum (Limits.MaxSessionBytes)
	peakHeld  int64
	closed    bool

	// Call slots (see box.makeSlot): prepared lazily, once a call
	// has shown that the sandbox is running with its grant in place.
	slotFree  map[string]bool // made and not yet seen claimed
	slotNext  int
	slotsMade int
	slotsOff  bool // unsupported here, or failed: wrappers mkdir
}

// slotTarget is how many prepared call slots the server keeps free: enough
// for the parallel callers of a typical agent command.
const slotTarget = 8

const (
	stateWatched uint8 = 1
	stateDone    uint8 = 2
	// stateInvalid: an invalid name, recorded once; each later scan
	// removes it again, because the command can add entries while the
	// host removes it (mkdir, then write into it) and so keep it alive.
	stateInvalid uint8 = 3
)

// claimed is a call whose ready marker was seen.
type claimed struct {
	dir   *callDir
	start time.Time
}

// fdWatch is the watch on one call directory (see hub.addCallDir).
type fdWatch struct {
	fd   int
	path string
}

func newServer(cfg *Config, box *box, d *Dispatcher) (*server, error) {
	s := &server{
		cfg:       cfg,
		box:       box,
		d:         d,
		callsPath: box.layout.Calls,
		kick:      make(chan struct{}, 1),
		drainCh:   make(chan chan struct{}),
		pending:   map[string]struct{}{},
		state:     map[string]uint8{},
		watches:   map[string]fdWatch{},
		respBytes: map[string]int64{},
		slotFree:  map[string]bool{},
		queue:     make(chan *claimed, cfg.Limits.MaxConcurrent),
	}
	s.idle = sync.NewCond(&s.mu)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.runCtx, s.runCancel = context.WithCancelCause(s.ctx)
	s.mode = WatchPoll
	if cfg.Watch != WatchPoll {
		if err := theHub.register(s); err != nil {
			if cfg.Watch == WatchEvents {
				s.cancel()
				return nil, fmt.Errorf("bridge: watch %s: %w", s.callsPath, err)
			}
			s.logf("gatebridge: filesystem events unavailable (%v); polling every %v", err, cfg.PollInterval)
		} else {
			s.mode = WatchEvents
		}
	}
	for range cfg.Limits.MaxConcurrent {
		s.workWG.Add(1)
		go s.worker()
	}
	s.loopWG.Add(2)
	go s.loop()
	go s.heartbeat()
	return s, nil
}

func (s *server) logf(format string, args ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, args...)
	}
}

// fillSlots prepares call slots until slotTarget are free, at most
// max_calls in a session (a sandbox that claims slots without publishing
// calls cannot make the host fill calls/ without end). A slot that cannot
// be made turns slots off for the session: wrappers make their own call
// directories, as they do whenever no free slot is left.
func (s *server) fillSlots() {
	for {
		s.mu.Lock()
		if s.slotsOff || s.closed || len(s.slotFree) >= slotTarget || s.slotsMade >= s.cfg.Limits.MaxCalls {
			s.mu.Unlock()
			return
		}
		s.slotNext++
		s.slotsMade++
		name := mailbox.SlotPrefix + strconv.Itoa(s.slotNext)
		if _, seen := s.state[name]; seen {
			// The sandbox used the name first (and may have an answer
			// under it): a slot of that name would get that answer.
			s.mu.Unlock()
			continue
		}
		s.mu.Unlock()
		err := s.box.makeSlot(name)
		s.mu.Lock()
		switch {
		case err == nil:
			s.slotFree[name] = true
		case errors.Is(err, unix.EEXIST): // the sandbox took the name: next
		default:
			s.slotsOff = true
			if !errors.Is(err, errSlotsUnsupported) {
				s.logf("gatebridge: cannot prepare call slots (%v); wrappers make their own call directories", err)
			}
		}
		s.mu.Unlock()
	}
}

// dropSlots removes the free slots before a run: the next command may run
// as another uid, which slots made for the last one would not admit.
func (s *server) dropSlots() {
	s.mu.Lock()
	names := s.slotFree
	s.slotFree = map[string]bool{}
	s.mu.Unlock()
	for name := range names {
		s.box.remove(name, 8)
	}
}

// newRun gives the calls of a new run a fresh parent context and returns
// the function that cancels them (the run timed out).
func (s *server) newRun() context.CancelCauseFunc {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runCancel(errRunEnded) // nothing is in flight between runs (drain)
	s.runCtx, s.runCancel = context.WithCancelCause(s.ctx)
	return s.runCancel
}

// notify is called by the hub for an event about id.
func (s *server) notify(e watchEvent) {
	s.pmu.Lock()
	if len(s.pending) < 4*s.cfg.Limits.MaxScanEntries {
		s.pending[e.id] = struct{}{}
	} else {
		s.rescan = true
	}
	s.pmu.Unlock()
	s.poke()
}

// notifyRescan asks for a full scan (events may have been lost).
func (s *server) notifyRescan() {
	s.pmu.Lock()
	s.rescan = true
	s.pmu.Unlock()
	s.poke()
}

func (s *server) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// loop is the one goroutine that claims calls; workers answer them.
func (s *server) loop() {
	defer s.loopWG.Done()
	defer close(s.queue)
	interval := s.cfg.RescanInterval
	if s.mode == WatchPoll {
		interval = s.cfg.PollInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	s.scan() // calls published before the watch existed
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.kick:
			s.pmu.Lock()
			ids, full := s.pending, s.rescan
			s.pending, s.rescan = map[string]struct{}{}, false
			s.pmu.Unlock()
			if full {
				s.scan()
			}
			for id := range ids {
				s.consider(id)
			}
		case <-t.C:
			s.scan()
		case ack := <-s.drainCh:
			s.scan()
			close(ack)
		}
	}
}

// scan lists calls/ (up to MaxScanEntries names) and considers each.
func (s *server) scan() {
	names, err := s.box.list(s.cfg.Limits.MaxScanEntries)
	if err != nil {
		s.logf("gatebridge: scan calls: %v", err)
	}
	for _, id := range names {
		if s.ctx.Err() != nil {
			return
		}
		s.consider(id)
	}
}

// heartbeat tells waiting wrappers that the host is alive: every
// RescanInterval it writes a byte to the wake FIFO of every call still in
// calls/ (answered calls are removed), whether it is queued behind busy
// gates, running, or not yet claimed. A wrapper with `read -t` restarts its
// GATEBRIDGE_WAIT_TIMEOUT on each byte, so that timeout measures the host's
// silence, not the call's duration. It is a separate goroutine because the
// claim loop blocks when every worker is busy, which is exactly when queued
// calls wait longest.
func (s *server) heartbeat() {
	defer s.loopWG.Done()
	t := time.NewTicker(s.cfg.RescanInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		names, _ := s.box.list(s.cfg.Limits.MaxScanEntries)
		for _, id := range names {
			if s.ctx.Err() != nil {
				return
			}
			if !mailbox.ValidID(id) {
				continue
			}
			if c, err := s.box.openCall(id); err == nil {
				c.wake()
				c.close()
			}
		}
	}
}

// consider claims id if its ready marker exists. Every path that gives up
// on an id for good marks it done, so it is handled at most once.
func (s *server) consider(id string) {
	s.mu.Lock()
	st := s.state[id]
	if st == stateDone || s.closed {
		s.mu.Unlock()
		return
	}
	if st == stateInvalid {
		s.mu.Unlock()
		s.box.remove(id, 64)
		return
	}
	if st == 0 && len(s.state) >= 2*s.cfg.Limits.MaxCalls+s.cfg.Limits.MaxScanEntries {
		s.mu.Unlock()
		s.refuseUntracked(id)
		return
	}
	s.mu.Unlock()

	if base, ok := mailbox.ParseAck(id); ok {
		s.acknowledge(id, base)
		return
	}
	start := time.Now()
	if !mailbox.ValidID(id) {
		s.mu.Lock()
		s.state[id] = stateInvalid
		s.mu.Unlock()
		s.box.remove(id, 64)
		s.d.Record(s.d.Reject(lossless.QuoteCap(id, 64), start, -1,
			errors.New("invalid call id (want 1-128 bytes of [A-Za-z0-9_.-], not starting with a dot)")).Record)
		return
	}
	c, err := s.box.openCall(id)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			if st == stateWatched { // gone before ready: forget it
				s.mu.Lock()
				delete(s.state, id)
				w := s.dropWatchLocked(id)
				s.mu.Unlock()
				theHub.removeCallDir(w.fd, w.path)
			}
			return
		}
		s.markDone(id)
		s.answer(&claimed{start: start}, id, s.d.Reject(id, start, gates.ExitDenied, fmt.Errorf("call %v", err)))
		return
	}
	rerr := c.ready()
	if errors.Is(rerr, errNotReady) {
		if st == 0 && s.mode == WatchEvents {
			s.mu.Lock()
			canWatch := len(s.watches) < 4*s.cfg.Limits.MaxConcurrent+64
			if canWatch {
				s.state[id] = stateWatched
				s.watches[id] = fdWatch{fd: -1} // holds the slot until the watch exists
			}
			s.mu.Unlock()
			if canWatch {
				st = stateWatched
				fd, path := theHub.addCallDir(s, id, c.fd)
				s.mu.Lock()
				s.watches[id] = fdWatch{fd, path}
				s.mu.Unlock()
				c.prepareWake() // saves the wrapper's mkfifo
			}
			rerr = c.ready() // watch, then look again
		}
		if errors.Is(rerr, errNotReady) {
			c.close()
			return
		}
	}
	s.markDone(id)
	s.mu.Lock()
	s.claimedN++
	over := s.claimedN > s.cfg.Limits.MaxCalls
	delete(s.slotFree, id)
	refill := len(s.slotFree) < slotTarget && !s.slotsOff
	none := len(s.slotFree) == 0
	s.mu.Unlock()
	if refill && none {
		// None is free (the run's first call): prepare them before this
		// call is answered, or the caller's next call, made as soon as
		// the answer is in, finds none and must make its own directory.
		s.fillSlots()
	} else if refill {
		defer s.fillSlots()
	}
	cl := &claimed{dir: c, start: start}
	if rerr != nil || over {
		if rerr == nil {
			rerr = s.errCallLimit()
		} else {
			rerr = fmt.Errorf("call %w", rerr)
		}
		s.answer(cl, id, s.d.Reject(id, start, gates.ExitDenied, rerr))
		c.close()
		return
	}
	s.mu.Lock()
	s.inflight++
	s.mu.Unlock()
	select {
	case s.queue <- cl:
	case <-s.ctx.Done():
		c.close()
		s.finish()
	}
}

// acknowledge handles calls/<base>.done, which the wrapper of call base
// creates once it has printed the answer: the answer files are removed and
// their bytes no longer count against max_session_bytes. The ack entry is
// removed whatever it is (never followed). An ack for a call that was never
// answered only removes the entry.
func (s *server) acknowledge(name, base string) {
	s.box.remove(name, 8)
	s.release(base)
}

// release removes the response files of call id and frees the bytes they
// held against max_session_bytes.
func (s *server) release(base string) {
	s.mu.Lock()
	n, ok := s.respBytes[base]
	if ok {
		delete(s.respBytes, base)
		s.heldBytes -= n
	}
	s.mu.Unlock()
	if ok {
		s.box.removeAnswer(base)
	}
}

// refuseUntracked answers an entry that arrived after the id table filled
// up (a flood far past max_calls) without adding it to the table: a ready
// call gets the call-limit refusal and its directory is removed, an invalid
// name is removed. Only the first is recorded in full; close records how
// many followed.
func (s *server) refuseUntracked(id string) {
	start := time.Now()
	if !mailbox.ValidID(id) {
		if s.box.remove(id, 64) == nil {
			s.countIgnored(s.d.Reject(lossless.QuoteCap(id, 64), start, -1, errors.New("invalid call id")).Record)
		}
		return
	}
	c, err := s.box.openCall(id)
	if err != nil {
		return
	}
	defer c.close()
	if c.ready() != nil {
		return // not published yet: seen again by a later scan
	}
	resp := s.d.Reject(id, start, gates.ExitDenied, s.errCallLimit())
	s.deliver(&claimed{dir: c, start: start}, id, 1, resp, 0)
	s.countIgnored(resp.Record)
}

// countIgnored counts an entry refused past the id table and records the
// first one.
func (s *server) countIgnored(rec CallRecord) {
	s.mu.Lock()
	s.ignored++
	first := s.ignored == 1
	s.mu.Unlock()
	if first {
		rec.Error += " (call table full: further entries are refused and counted, not recorded one by one)"
		s.d.Record(rec)
	}
}

func (s *server) ignoredCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ignored
}

// markDone marks id handled for good and releases its watch, if any.
func (s *server) markDone(id string) {
	s.mu.Lock()
	s.state[id] = stateDone
	w := s.dropWatchLocked(id)
	s.mu.Unlock()
	theHub.removeCallDir(w.fd, w.path)
}

// dropWatchLocked removes id's watch slot and returns the watch to release
// (fd -1 when there is none). s.mu must be held.
func (s *server) dropWatchLocked(id string) fdWatch {
	w, ok := s.watches[id]
	if !ok {
		return fdWatch{fd: -1}
	}
	delete(s.watches, id)
	return w
}

func (s *server) finish() {
	s.mu.Lock()
	s.inflight--
	if s.inflight == 0 {
		s.idle.Broadcast()
	}
	s.mu.Unlock()
}

func (s *server) worker() {
	defer s.workWG.Done()
	for c := range s.queue {
		s.handle(c)
		c.dir.close()
		s.finish()
	}
}

// handle reads, dispatches and answers one claimed call.
func (s *server) handle(c *claimed) {
	id := c.dir.id
	lim := s.cfg.Limits
	call, err := c.dir.read(mailbox.Limits{MaxArgs: lim.MaxArgs, MaxArgBytes: lim.MaxArgBytes, MaxStdinBytes: lim.MaxStdinBytes})
	if err != nil {
		code := gates.ExitUsage
		var le *mailbox.LimitError
		if errors.As(err, &le) {
			code, err = gates.ExitDenied, s.cfg.limitError(le)
		} else if hostilefs.Refused(err) {
			code = gates.ExitDenied
		}
		s.answer(c, id, s.d.Reject(id, c.start, code, err))
		return
	}
	s.mu.Lock()
	parent := s.runCtx
	s.mu.Unlock()
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	stop := s.watchCaller(c.dir, cancel)
	st := newStreamer(s, c.dir, id, call.version)
	resp := s.d.Dispatch(ctx, &Request{ID: id, Gate: call.gate, Args: call.args, Stdin: call.stdin, Cwd: call.cwd, Start: c.start,
		Stdout: st.stdout(), Stderr: st.stderr()})
	stop()
	out, errOut, streamed := st.finish()
	if errors.Is(context.Cause(ctx), errCallerGone) {
		// No one will read the answer: record it and drop the call.
		s.box.remove(id, lim.MaxArgs+64)
		s.release(id)
		s.d.Record(resp.Record)
		return
	}
	// What was not streamed, then gatebridge's own messages.
	resp.Stdout = append(out, resp.Stdout...)
	resp.Stderr = append(errOut, resp.Stderr...)
	if st.errText != "" {
		resp.Record.Error = strings.TrimSpace(resp.Record.Error + " (stream: " + st.errText + ")")
	}
	s.deliver(c, id, call.version, resp, streamed)
	s.d.Record(resp.Record)
}

// watchCaller cancels the call's context with errCallerGone when its
// caller goes away: its wrapper left a cancel marker (it was stopped by a
// signal), or it stopped holding the wake FIFO open (killed, or gave up
// waiting). Only a caller seen waiting at the start is watched for the
// FIFO; the marker is watched for every caller, polling ones included.
func (s *server) watchCaller(c *callDir, cancel context.CancelCauseFunc) (stop func()) {
	if c.canceled() {
		cancel(errCallerGone)
		return func() {}
	}
	waiting, known := c.waiting()
	fifo := known && waiting
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(callerCheck)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			gone := c.canceled()
			if !gone && fifo {
				waiting, known := c.waiting()
				gone = known && !waiting
			}
			if gone {
				cancel(errCallerGone)
				return
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// answer delivers a response to a call whose version is not known (it
// could not be read): v1, which every client reads.
func (s *server) answer(c *claimed, id string, resp *Response) {
	s.deliverVersion(c, id, 1, resp)
}

func (s *server) deliverVersion(c *claimed, id string, version int, resp *Response) {
	s.deliver(c, id, version, resp, 0)
	s.d.Record(resp.Record)
}

// deliver writes the answer (exit file last), wakes the wrapper, removes
// the call directory, and completes resp.Record with what delivery did.
//
// streamed is what the call's stream file already holds (see streamer).
func (s *server) deliver(c *claimed, id string, version int, resp *Response, streamed int64) {
	rec := &resp.Record
	ans := mailbox.Answer{Code: resp.ExitCode, Stdout: resp.Stdout, Stderr: resp.Stderr}
	if !s.reserve(id, streamed+ans.Size()) {
		msg := fmt.Sprintf("response of %d bytes refused: the session already holds %d bytes of unread responses (%s=%d)",
			ans.Size(), s.held(), s.cfg.limitNote("max_session_bytes"), s.cfg.Limits.MaxSessionBytes)
		rec.ExitCode, rec.Decision = gates.ExitDenied, DecisionRejected
		rec.Error = strings.TrimSpace(rec.Error + "; " + msg)
		ans = mailbox.Answer{Code: gates.ExitDenied, Stderr: []byte("gatebridge: " + msg + "\n")}
		s.reserveAnyway(id, streamed+ans.Size())
	}
	rec.BytesOut = streamed + ans.Size()
	werr := s.box.respond(id, version, ans)
	if werr != nil {
		rec.Error = strings.TrimSpace(rec.Error + "; " + werr.Error())
		// Session filesystem full (or the like): try a short error answer,
		// so the caller neither reads a partial answer as complete nor
		// waits for an exit file that never comes.
		rec.ExitCode = gates.ExitFailure
		ans = mailbox.Answer{Code: gates.ExitFailure, Stderr: []byte("gatebridge: cannot write the response: " + werr.Error() + "\n")}
		rec.BytesOut = streamed + ans.Size()
		if err := s.box.respond(id, version, ans); err != nil {
			// Still no room: what this call streamed goes, so that its
			// caller gets the error instead of waiting forever.
			s.box.removeAnswer(id)
			if err := s.box.respond(id, version, ans); err != nil {
				rec.Error += "; error response: " + err.Error()
			}
		}
	}
	if c.dir != nil {
		if err := c.dir.wake(); err != nil && werr == nil {
			rec.Error = strings.TrimSpace(rec.Error + " (wake: " + err.Error() + ")")
		}
	}
	s.box.remove(id, s.cfg.Limits.MaxArgs+64)
	rec.Duration = time.Since(c.start)
	rec.DurationMS = float64(rec.Duration.Microseconds()) / 1000
}

// reserve accounts n response bytes for call id against
// max_session_bytes; false when they do not fit.
func (s *server) reserve(id string, n int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n > 0 && s.heldBytes+n > s.cfg.Limits.MaxSessionBytes {
		return false
	}
	s.holdLocked(id, n)
	return true
}

// reserveAnyway accounts a short refusal message past the cap.
func (s *server) reserveAnyway(id string, n int64) {
	s.mu.Lock()
	s.holdLocked(id, n)
	s.mu.Unlock()
}

func (s *server) holdLocked(id string, n int64) {
	s.heldBytes += n - s.respBytes[id]
	s.respBytes[id] = n
	s.peakHeld = max(s.peakHeld, s.heldBytes)
}

func (s *server) held() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heldBytes
}

// errCallLimit is the refusal of a call past Limits.MaxCalls.
func (s *server) errCallLimit() error {
	return s.cfg.limitError(&mailbox.LimitError{Limit: "max_calls", What: fmt.Sprintf("session call limit reached (%d calls)", s.cfg.Limits.MaxCalls)})
}

// drain answers every call already published and waits until no call is in
// flight.
func (s *server) drain() {
	ack := make(chan struct{})
	select {
	case s.drainCh <- ack:
		<-ack
	case <-s.ctx.Done():
		return
	}
	s.mu.Lock()
	for s.inflight > 0 {
		s.idle.Wait()
	}
	s.mu.Unlock()
}

// stop cancels the calls in flight and stops answering for good.
func (s *server) stop() { s.cancel() }

// close stops the watcher and the workers (gates are cancelled) and
// releases the watches. The dispatcher waits for the gates.
func (s *server) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	if s.mode == WatchEvents {
		theHub.unregister(s)
	}
	s.cancel()
	s.loopWG.Wait()
	s.workWG.Wait()
	// Calls that never became ready still hold a watch and its fd.
	s.mu.Lock()
	watches := s.watches
	s.watches = map[string]fdWatch{}
	s.mu.Unlock()
	for _, w := range watches {
		theHub.removeCallDir(w.fd, w.path)
	}
}
