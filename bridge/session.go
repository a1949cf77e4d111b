package bridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/wrappers"
)

// ErrClosed is returned by methods of a closed [Session].
var ErrClosed = errors.New("bridge: session closed")

var errHubClosed = errors.New("bridge: watcher closed")

// Session is one command's mailbox: a session directory, the watcher that
// notices calls in it, and the workers that answer them.
type Session struct {
	id        string
	cfg       Config
	dirs      sandbox.SessionDirs
	callsPath string
	mode      WatchMode // effective: events or poll

	callsFd, respFd int
	lockFd          int // flock held while the session lives (see Prune)

	ctx    context.Context // cancelled by Close: stops the loop and gates
	cancel context.CancelFunc
	loopWG sync.WaitGroup
	workWG sync.WaitGroup
	gateWG sync.WaitGroup // gate goroutines, including abandoned ones

	kick    chan struct{}
	drainCh chan chan struct{}
	pmu     sync.Mutex
	pending map[string]struct{}
	rescan  bool

	queue chan *call

	mu        sync.Mutex
	state     map[string]uint8 // id → stateWatched | stateDone
	watches   map[string]fdWatch
	claimed   int
	inflight  int
	idle      *sync.Cond
	records   []CallRecord // this run's, at most Limits.MaxRecords
	omitted   int          // this run's records past MaxRecords
	ignored   int
	gctx      context.Context // gates' parent: cancelled when a run times out or is cancelled
	gcancel   context.CancelFunc
	slots     chan struct{}    // max_concurrent: held until a gate really returns
	respBytes map[string]int64 // unacknowledged response bytes per call
	heldBytes int64            // their sum (bridge.limits.max_session_bytes)
	peakHeld  int64
	answer    *string
	closed    bool
	tmpSerial uint64
	auditMu   sync.Mutex
}

const (
	stateWatched uint8 = 1
	stateDone    uint8 = 2
)

type call struct {
	id    string
	dirFd int
	start time.Time
}

// Open creates a session directory under cfg.Dir with bin/ (the wrappers
// for cfg.Gates), calls/, responses/ and tmp/, and starts answering calls.
// The caller must Close it.
func Open(cfg Config) (*Session, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	parent := cfg.Dir
	if parent == "" {
		parent = DefaultSessionParent()
		if err := EnsurePrivateParent(parent); err != nil {
			return nil, err
		}
	}
	if _, done := pruned.LoadOrStore(parent, true); !done {
		// Quietly: the command's stderr is no place for it (`gatebridge
		// prune` reports what it removes). Only a failure is worth a line.
		if _, err := Prune(parent); err != nil && cfg.Logf != nil {
			cfg.Logf("gatebridge: cleaning up sessions of gatebridge processes that died: %v", err)
		}
	}
	root, lockFd, err := mkSessionDir(parent)
	if err != nil {
		return nil, fmt.Errorf("bridge: create session dir: %w", err)
	}
	if root, err = filepath.Abs(root); err != nil {
		return nil, err
	}
	s := &Session{
		id:        uuid.NewString(),
		cfg:       cfg,
		callsPath: filepath.Join(root, "calls"),
		callsFd:   -1,
		lockFd:    lockFd,
		respFd:    -1,
		kick:      make(chan struct{}, 1),
		drainCh:   make(chan chan struct{}),
		pending:   map[string]struct{}{},
		state:     map[string]uint8{},
		watches:   map[string]fdWatch{},
		respBytes: map[string]int64{},
		queue:     make(chan *call, cfg.Limits.MaxConcurrent),
	}
	s.idle = sync.NewCond(&s.mu)
	s.dirs = sandbox.SessionDirs{
		Root:      root,
		Bin:       filepath.Join(root, "bin"),
		Calls:     s.callsPath,
		Responses: filepath.Join(root, "responses"),
		Tmp:       filepath.Join(root, "tmp"),
	}
	if err := s.setup(); err != nil {
		s.closeFds()
		if !cfg.Keep {
			removeTree(root)
		}
		s.releaseLock(cfg.Keep)
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.gctx, s.gcancel = context.WithCancel(s.ctx)
	s.slots = make(chan struct{}, cfg.Limits.MaxConcurrent)
	s.mode = WatchPoll
	if cfg.Watch != WatchPoll {
		if err := theHub.register(s); err != nil {
			if cfg.Watch == WatchEvents {
				s.cancel()
				s.closeFds()
				removeTree(root)
				s.releaseLock(false)
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

func (s *Session) setup() error {
	// 0700 everywhere: no other host user may list, read or write a
	// session. A command running as another uid (gatebridge is root) is
	// let in with [Session.Allow].
	for _, d := range []string{s.dirs.Bin, s.dirs.Calls, s.dirs.Responses, s.dirs.Tmp} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return fmt.Errorf("bridge: create session dir: %w", err)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return fmt.Errorf("bridge: chmod session dir: %w", err)
		}
	}
	specs := s.cfg.Gates.Specs()
	ws := make([]wrappers.Spec, len(specs))
	for i, sp := range specs {
		ws[i] = wrappers.Spec{Name: sp.Name, Summary: sp.Summary, Stdin: wrapperStdin(sp.Stdin)}
	}
	if err := wrappers.WriteDir(s.dirs.Bin, ws); err != nil {
		return fmt.Errorf("bridge: %w", err)
	}
	var err error
	if s.callsFd, err = unix.Open(s.dirs.Calls, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != nil {
		return fmt.Errorf("bridge: open calls dir: %w", err)
	}
	if s.respFd, err = unix.Open(s.dirs.Responses, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != nil {
		return fmt.Errorf("bridge: open responses dir: %w", err)
	}
	return nil
}

func (s *Session) closeFds() {
	if s.callsFd >= 0 {
		unix.Close(s.callsFd)
		s.callsFd = -1
	}
	if s.respFd >= 0 {
		unix.Close(s.respFd)
		s.respFd = -1
	}
}

// Allow lets uid, the user a command runs as when that is not
// gatebridge's own (gatebridge is root), use the session, and no one else:
// with a POSIX ACL entry for uid where the filesystem has ACLs (it may
// traverse the root, read bin/ and responses/, write calls/ and tmp/;
// group and other still get nothing), else by handing calls/ and tmp/ to
// uid:gid and bin/ and responses/ to group gid (see
// [sandbox.GrantSession], which the isolating backends also call).
// Allowing gatebridge's own uid does nothing.
func (s *Session) Allow(uid, gid int) error {
	if err := sandbox.GrantSession(s.dirs, uid, gid); err != nil {
		return fmt.Errorf("bridge: %w", err)
	}
	return nil
}

// ID returns the session's id.
func (s *Session) ID() string { return s.id }

// Dirs returns the host paths of the session directory.
func (s *Session) Dirs() sandbox.SessionDirs { return s.dirs }

// WatchMode returns how the session notices calls: events or poll.
func (s *Session) WatchMode() WatchMode { return s.mode }

// Env returns the environment the wrappers need besides the paths a
// backend sets (see [sandbox.SessionEnv]): the wake mode and how long a
// wrapper waits for the host before giving up with exit 124.
func (s *Session) Env() []string {
	wake := "fifo"
	if s.mode == WatchPoll {
		wake = "poll"
	}
	maxT := s.cfg.Limits.GateTimeout
	for _, sp := range s.cfg.Gates.Specs() {
		maxT = max(maxT, sp.Timeout)
	}
	wait := int(math.Ceil((maxT + 30*time.Second).Seconds()))
	return []string{
		wrappers.EnvWake + "=" + wake,
		wrappers.EnvWaitTimeout + "=" + strconv.Itoa(wait),
		"GATEBRIDGE_SESSION_ID=" + s.id,
	}
}

func (s *Session) logf(format string, args ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, args...)
	}
}

// notify is called by the hub for an event about id.
func (s *Session) notify(e watchEvent) {
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
func (s *Session) notifyRescan() {
	s.pmu.Lock()
	s.rescan = true
	s.pmu.Unlock()
	s.poke()
}

func (s *Session) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// loop is the one goroutine that claims calls; workers answer them.
func (s *Session) loop() {
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
func (s *Session) scan() {
	names, err := readDirNames(s.callsFd, s.cfg.Limits.MaxScanEntries)
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
// gates, running, or not yet claimed. A wrapper with `read -t` (bash,
// busybox) restarts its GATEBRIDGE_WAIT_TIMEOUT on each byte, so that
// timeout measures the host's silence, not the call's duration, and a call
// that waits long in the queue is not given up while the host still means
// to run it. It is a separate goroutine because the claim loop blocks when
// every worker is busy, which is exactly when queued calls wait longest.
func (s *Session) heartbeat() {
	defer s.loopWG.Done()
	t := time.NewTicker(s.cfg.RescanInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		names, _ := readDirNames(s.callsFd, s.cfg.Limits.MaxScanEntries)
		for _, id := range names {
			if s.ctx.Err() != nil {
				return
			}
			if !ValidID(id) {
				continue
			}
			fd, err := openDirAt(s.callsFd, id)
			if err != nil {
				continue
			}
			wakeAt(fd, "wake")
			unix.Close(fd)
		}
	}
}

// ValidID reports whether id is acceptable as a call id: 1–128 bytes of
// [A-Za-z0-9_.-], not starting with a dot.
func ValidID(id string) bool {
	if id == "" || len(id) > 128 || id[0] == '.' {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// consider claims id if its ready marker exists. Every path that gives up
// on an id for good marks it done, so it is handled at most once.
func (s *Session) consider(id string) {
	s.mu.Lock()
	st := s.state[id]
	if st == stateDone || s.closed {
		s.mu.Unlock()
		return
	}
	if st == 0 && len(s.state) >= 2*s.cfg.Limits.MaxCalls+s.cfg.Limits.MaxScanEntries {
		s.mu.Unlock()
		s.refuseUntracked(id)
		return
	}
	s.mu.Unlock()

	if base, ok := strings.CutSuffix(id, wrappers.AckSuffix); ok && ValidID(base) {
		s.acknowledge(id, base)
		return
	}
	start := time.Now()
	if !ValidID(id) {
		s.markDone(id)
		budget := 64
		removeAllAt(s.callsFd, id, &budget)
		s.record(CallRecord{ID: quoteCap(id, 64), Decision: DecisionRejected, ExitCode: -1,
			Error: "invalid call id (want 1-128 bytes of [A-Za-z0-9_.-], not starting with a dot)", Start: start})
		return
	}
	dirFd, err := openDirAt(s.callsFd, id)
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
		s.reject(id, -1, start, gates.ExitDenied, fmt.Errorf("call %v", err))
		return
	}
	rst, err := statAt(dirFd, "ready")
	if err != nil {
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
				fd, path := theHub.addCallDir(s, id, dirFd)
				s.mu.Lock()
				s.watches[id] = fdWatch{fd, path}
				s.mu.Unlock()
				makeWakeAt(dirFd) // saves the wrapper's mkfifo
			}
			rst, err = statAt(dirFd, "ready") // watch, then look again
		}
		if err != nil {
			unix.Close(dirFd)
			return
		}
	}
	s.markDone(id)
	s.mu.Lock()
	s.claimed++
	over := s.claimed > s.cfg.Limits.MaxCalls
	s.mu.Unlock()
	if rst.Mode&unix.S_IFMT != unix.S_IFREG {
		why := ErrNotRegular
		if rst.Mode&unix.S_IFMT == unix.S_IFLNK {
			why = ErrSymlink
		}
		s.reject(id, dirFd, start, gates.ExitDenied, fmt.Errorf("call ready %w", why))
		unix.Close(dirFd)
		return
	}
	if over {
		s.reject(id, dirFd, start, gates.ExitDenied, s.errCallLimit())
		unix.Close(dirFd)
		return
	}
	s.mu.Lock()
	s.inflight++
	s.mu.Unlock()
	select {
	case s.queue <- &call{id: id, dirFd: dirFd, start: start}:
	case <-s.ctx.Done():
		unix.Close(dirFd)
		s.finish()
	}
}

// acknowledge handles calls/<base>.done, which the wrapper of call base
// creates once it has printed the response: the response files are removed
// and their bytes no longer count against max_session_bytes. The ack entry
// is removed whatever it is (never followed). An ack for a call that was
// never answered only removes the entry.
func (s *Session) acknowledge(name, base string) {
	budget := 8
	removeAllAt(s.callsFd, name, &budget)
	s.mu.Lock()
	n, ok := s.respBytes[base]
	if ok {
		delete(s.respBytes, base)
		s.heldBytes -= n
	}
	s.mu.Unlock()
	if ok {
		for _, ext := range responseExts {
			unix.Unlinkat(s.respFd, base+ext, 0)
		}
	}
}

// refuseUntracked answers an entry that arrived after the id table filled
// up (a flood far past max_calls) without adding it to the table: a ready
// call gets the call-limit refusal and its directory is removed, an invalid
// name is removed. Only the first is recorded in full; Close records how
// many followed (see [Session.Ignored]).
func (s *Session) refuseUntracked(id string) {
	start := time.Now()
	if !ValidID(id) {
		budget := 64
		if removeAllAt(s.callsFd, id, &budget) == nil {
			s.countIgnored(CallRecord{ID: quoteCap(id, 64), Decision: DecisionRejected, ExitCode: -1,
				Error: "invalid call id", Start: start})
		}
		return
	}
	dirFd, err := openDirAt(s.callsFd, id)
	if err != nil {
		return
	}
	defer unix.Close(dirFd)
	if _, err := statAt(dirFd, "ready"); err != nil {
		return // not published yet: seen again by a later scan
	}
	msg := s.errCallLimit().Error()
	rec := CallRecord{ID: id, Decision: DecisionRejected, ExitCode: gates.ExitDenied, Error: msg, Start: start}
	s.deliver(&call{id: id, dirFd: dirFd, start: start}, &rec, nil, []byte("gatebridge: "+msg+"\n"))
	s.countIgnored(rec)
}

// countIgnored counts an entry refused past the id table and records the
// first one.
func (s *Session) countIgnored(rec CallRecord) {
	s.mu.Lock()
	s.ignored++
	first := s.ignored == 1
	s.mu.Unlock()
	if first {
		rec.Error += " (call table full: further entries are refused and counted, not recorded one by one)"
		s.record(rec)
	}
}

// markDone marks id handled for good and releases its watch, if any.
func (s *Session) markDone(id string) {
	s.mu.Lock()
	s.state[id] = stateDone
	w := s.dropWatchLocked(id)
	s.mu.Unlock()
	theHub.removeCallDir(w.fd, w.path)
}

// dropWatchLocked removes id's watch slot and returns the watch to release
// (fd -1 when there is none). s.mu must be held.
func (s *Session) dropWatchLocked(id string) fdWatch {
	w, ok := s.watches[id]
	if !ok {
		return fdWatch{fd: -1}
	}
	delete(s.watches, id)
	return w
}

// fdWatch is the watch on one call directory (see hub.addCallDir).
type fdWatch struct {
	fd   int
	path string
}

func (s *Session) finish() {
	s.mu.Lock()
	s.inflight--
	if s.inflight == 0 {
		s.idle.Broadcast()
	}
	s.mu.Unlock()
}

func (s *Session) worker() {
	defer s.workWG.Done()
	for c := range s.queue {
		s.handle(c)
		unix.Close(c.dirFd)
		s.finish()
	}
}

// Drain answers every call already published and waits until no call is
// in flight. Run calls it after the command exits, so calls made just before
// the exit (or by background processes) are answered and recorded.
func (s *Session) Drain() {
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

// Close stops the watcher, waits for calls in flight (gates are cancelled),
// and removes the session directory unless Config.Keep is set.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
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
	gatesDone := make(chan struct{})
	go func() { s.gateWG.Wait(); close(gatesDone) }()
	var err error
	select {
	case <-gatesDone:
	case <-time.After(time.Second):
		// Its caller was answered (124) and the run is over: do not make
		// gatebridge wait for it. It keeps its max_concurrent slot.
		err = errors.New("bridge: close: a gate ignored cancellation and is still running")
	}
	if n := s.Ignored(); n > 1 {
		s.record(CallRecord{Decision: DecisionRejected, ExitCode: gates.ExitDenied, Start: time.Now(),
			Error: fmt.Sprintf("%d call entries refused while the call table was full (limit set by bridge.limits.max_calls)", n)})
	}
	s.closeFds()
	if !s.cfg.Keep {
		// removeTree, not os.RemoveAll: the sandbox may have left
		// directories it made unreadable (chmod 000).
		if rerr := removeTree(s.dirs.Root); rerr != nil {
			err = errors.Join(err, fmt.Errorf("bridge: remove session dir: %w", rerr))
		}
	}
	s.releaseLock(s.cfg.Keep)
	return err
}

// releaseLock ends the session's lease. A kept session's lock file becomes
// <root>.kept, which Prune respects.
func (s *Session) releaseLock(keep bool) {
	if s.lockFd < 0 {
		return
	}
	lock := s.dirs.Root + lockSuffix
	if keep {
		os.Rename(lock, s.dirs.Root+keptSuffix)
	} else {
		os.Remove(lock)
	}
	unix.Close(s.lockFd)
	s.lockFd = -1
}

// Calls returns the records of the current (or last) Run's calls: the
// first Limits.MaxRecords of them; [Session.CallsOmitted] counts the rest.
func (s *Session) Calls() []CallRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]CallRecord(nil), s.records...)
}

// Answer returns the answer recorded by submit, if any.
func (s *Session) Answer() (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.answer == nil {
		return "", false
	}
	return *s.answer, true
}

func (s *Session) setAnswer(a string) {
	s.mu.Lock()
	s.answer = &a
	s.mu.Unlock()
}

// Ignored counts call entries refused without being tracked because the
// session's id table was full (a flood far past bridge.limits.max_calls).
// Each ready one got the call-limit refusal; the first is in [Session.Calls]
// and Close adds one summary record to the audit log.
func (s *Session) Ignored() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ignored
}

// CallsOmitted is the number of this run's calls past Limits.MaxRecords,
// counted but not kept.
func (s *Session) CallsOmitted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.omitted
}

// capRecordArgs keeps at most max bytes of arguments in a record, marking
// what was cut.
func capRecordArgs(args []string, max int) []string {
	total := 0
	for i, a := range args {
		if total+len(a) > max {
			out := append(args[:i:i], a[:min(len(a), max-total)]+"…")
			return append(out, fmt.Sprintf("… %d more bytes cut (bridge.limits.max_record_bytes)", bytesFrom(args[i:])-(max-total)))
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

func (s *Session) record(r CallRecord) {
	r.Args = capRecordArgs(r.Args, s.cfg.Limits.MaxRecordBytes)
	s.mu.Lock()
	if len(s.records) < s.cfg.Limits.MaxRecords {
		s.records = append(s.records, r)
	} else {
		s.omitted++
	}
	s.mu.Unlock()
	if s.cfg.Audit != nil {
		line, err := json.Marshal(auditRecord{Time: r.Start.UTC(), Session: s.id, CallRecord: r})
		if err == nil {
			s.auditMu.Lock()
			s.cfg.Audit.Write(append(line, '\n'))
			s.auditMu.Unlock()
		}
	}
}

type auditRecord struct {
	Time    time.Time `json:"time"`
	Session string    `json:"session"`
	CallRecord
}

// wrapperStdin maps a gate's stdin mode to the wrapper's by name, not by
// the enums' numbering.
func wrapperStdin(m gates.StdinMode) wrappers.StdinMode {
	switch m {
	case gates.StdinAlways:
		return wrappers.StdinAlways
	case gates.StdinIfNoArgs:
		return wrappers.StdinIfNoArgs
	default:
		return wrappers.StdinNone
	}
}

// mkSessionDir makes parent/gb-<128 random bits, hex> with mode 0700: the
// name cannot be guessed, so even a parent others can traverse does not
// lead them to a session. Before the directory it creates
// parent/gb-<hex>.lock and holds an exclusive flock on it for the
// session's life: [Prune] removes the sessions whose lock is free (their
// owner died without cleaning up).
func mkSessionDir(parent string) (root string, lockFd int, err error) {
	for range 5 {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", -1, err
		}
		root := filepath.Join(parent, sessionPrefix+hex.EncodeToString(b[:]))
		fd, err := unix.Open(root+lockSuffix, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return "", -1, err
		}
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			unix.Close(fd)
			os.Remove(root + lockSuffix)
			return "", -1, fmt.Errorf("lock %s: %w", root+lockSuffix, err)
		}
		err = os.Mkdir(root, 0o700)
		if err == nil {
			err = os.Chmod(root, 0o700) // umask
		}
		if err != nil {
			os.Remove(root + lockSuffix)
			unix.Close(fd)
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			return "", -1, err
		}
		return root, fd, nil
	}
	return "", -1, errors.New("could not pick a new session name")
}

const (
	sessionPrefix = "gb-"
	lockSuffix    = ".lock"
	keptSuffix    = ".kept" // Config.Keep: left for a human, never pruned
)

// pruned remembers the parents Open has pruned in this process.
var pruned sync.Map

// Prune removes from dir the sessions whose owner is gone: a gb-<hex>
// session whose lock file is not locked (its gatebridge was killed, or
// the machine lost power), one with no lock file that is older than a
// minute, and lock files left without a session. Directories the sandbox
// made unreadable are removed too; nothing is followed. Sessions of other
// users whose lock file we cannot open are left alone. It returns the
// paths removed. Open prunes its parent once per process.
func Prune(dir string) (removed []string, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var errs []error
	for _, e := range ents {
		name := e.Name()
		base, isLock := strings.CutSuffix(name, lockSuffix)
		if !strings.HasPrefix(base, sessionPrefix) || len(base) != len(sessionPrefix)+32 {
			continue
		}
		root := filepath.Join(dir, base)
		if _, err := os.Lstat(root + keptSuffix); err == nil {
			continue
		}
		if isLock {
			if _, err := os.Lstat(root); err == nil {
				continue // handled with its session
			}
		} else if e.Type()&fs.ModeSymlink != 0 || !e.IsDir() {
			continue
		}
		fd, err := unix.Open(root+lockSuffix, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		switch {
		case errors.Is(err, unix.ENOENT):
			fi, serr := os.Lstat(root)
			if serr != nil || time.Since(fi.ModTime()) < time.Minute {
				continue // being created, or already gone
			}
		case err != nil:
			continue // another user's, or not a file we may touch
		default:
			if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
				unix.Close(fd)
				continue // its owner is alive
			}
		}
		rerr := removeTree(root)
		if rerr == nil {
			os.Remove(root + lockSuffix)
			removed = append(removed, root)
		} else {
			errs = append(errs, fmt.Errorf("remove %s: %w", root, rerr))
		}
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	return removed, errors.Join(errs...)
}
