package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/gates/secrets"
	"github.com/gatebridge/gatebridge/internal/hostilefs"
	"github.com/gatebridge/gatebridge/internal/lossless"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/wrappers"
)

// ErrClosed is returned by methods of a closed [Session].
var ErrClosed = errors.New("bridge: session closed")

// Session is one command's mailbox: a session directory with a wrapper
// per gate, the [Dispatcher] that runs the calls, and the mailbox server
// that reads them and writes the answers.
type Session struct {
	id     string
	cfg    Config
	layout mailbox.Layout
	lease  *lease
	box    *box
	d      *Dispatcher
	srv    *server

	binMu      sync.Mutex // wrapper writes
	binFd      int        // bin/, opened as it was made (under binMu)
	wrote      bool       // bin/ was written (under binMu): later writes replace
	stopWatch  func()     // registry watch
	mu         sync.Mutex
	closed     bool
	runStarted bool
}

// Open creates a session directory under cfg.Dir with bin/ (a wrapper per
// gate of cfg.Gates, kept in step with the registry while the session
// lives), calls/, responses/ and tmp/, and starts answering calls. The
// caller must Close it.
func Open(cfg Config) (*Session, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	parent := cfg.Dir
	if parent == "" {
		parent = DefaultParent()
		if err := EnsurePrivateParent(parent); err != nil {
			return nil, err
		}
	}
	prune(parent, cfg.Logf)
	sd, err := createSessionDir(parent)
	if err != nil {
		return nil, fmt.Errorf("bridge: %w", err)
	}
	layout := sd.layout
	// bin/ stays open for the wrappers' writes; calls/ and responses/
	// become the box's; the rest closes here.
	s := &Session{id: uuid.NewString(), cfg: cfg, layout: layout, lease: sd.lease, binFd: sd.bin}
	s.box = &box{layout: layout, callsFd: sd.calls, respFd: sd.responses}
	sd.bin, sd.calls, sd.responses = -1, -1, -1
	sd.close()
	fail := func(err error) (*Session, error) {
		if s.stopWatch != nil {
			s.stopWatch()
		}
		s.box.close()
		s.binMu.Lock()
		unix.Close(s.binFd)
		s.binFd = -1
		s.binMu.Unlock()
		if !cfg.Keep {
			hostilefs.RemoveTree(layout.Root)
		}
		s.lease.release(cfg.Keep)
		return nil, err
	}
	// Wrappers follow the registry: a gate registered or removed while the
	// session lives gains or loses its command at once.
	var werr error
	s.stopWatch = cfg.Gates.Watch(func(specs []gates.Spec) {
		if err := s.writeWrappers(specs); err != nil {
			s.logf("gatebridge: %v", err)
		}
	})
	if werr = s.writeWrappers(cfg.Gates.Specs()); werr != nil {
		return fail(werr)
	}
	if s.d, err = NewDispatcher(cfg, s.id); err != nil {
		return fail(err)
	}
	if s.srv, err = newServer(&s.cfg, s.box, s.d); err != nil {
		return fail(err)
	}
	return s, nil
}

// prune removes the dead sessions of parent ([PruneSessionsWithin]): at the
// first Open of parent in this process, before it goes on; then, in a
// long-running process (serve), at an Open at least prunePeriod after the
// last prune, in the background, one at a time. Sessions whose removal
// at Close did not finish (something still wrote there) and those of
// gatebridge processes that died meanwhile would otherwise stay until the
// process ends.
//
// Quietly: the command's stderr is no place for it (`gatebridge prune`
// reports what it removes). Only a failure is worth a line. A prune
// spends at most openPruneTime: a leftover that something still writes to
// is not worth more each time; what is left waits for the next prune.
func prune(parent string, logf func(string, ...any)) {
	v, seen := prunes.LoadOrStore(parent, &pruneState{})
	st := v.(*pruneState)
	st.mu.Lock()
	if seen && (st.running || time.Since(st.last) < prunePeriod) {
		st.mu.Unlock()
		return
	}
	st.running = true
	st.mu.Unlock()
	run := func() {
		if _, err := PruneSessionsWithin(parent, openPruneTime); err != nil && logf != nil {
			logf("gatebridge: cleaning up sessions of gatebridge processes that died: %v", err)
		}
		st.mu.Lock()
		st.running, st.last = false, time.Now()
		st.mu.Unlock()
	}
	if !seen {
		run()
		return
	}
	go run()
}

// prunes holds a *pruneState per parent Open has pruned in this process.
var prunes sync.Map

type pruneState struct {
	mu      sync.Mutex
	running bool
	last    time.Time // when the last prune ended
}

// maxBinEntries bounds the names of bin/ read when the wrappers change,
// besides one per gate.
const maxBinEntries = 4096

// prunePeriod is how often, at most, Open prunes a parent again.
var prunePeriod = time.Minute

// openPruneTime bounds each prune of Open (see above).
const openPruneTime = 2 * time.Second

// writeWrappers makes bin/ hold exactly one wrapper per spec.
func (s *Session) writeWrappers(specs []gates.Spec) error {
	s.binMu.Lock()
	defer s.binMu.Unlock()
	ws := make([]wrappers.Spec, len(specs))
	keep := map[string]bool{}
	for i, sp := range specs {
		ws[i] = wrappers.Spec{Name: sp.Name, Summary: sp.Summary, Stdin: sp.Stdin}
		keep[sp.Name] = true
	}
	if s.binFd < 0 {
		return nil // closed
	}
	if !s.wrote {
		// The first write, during Open: bin/ is new and empty, and no
		// command runs yet.
		s.wrote = true
		if err := wrappers.CreateDirAt(s.binFd, ws); err != nil {
			return fmt.Errorf("bridge: %w", err)
		}
		return nil
	}
	if err := wrappers.WriteDirAt(s.binFd, ws); err != nil {
		return fmt.Errorf("bridge: %w", err)
	}
	// Through the fd that was made with bin/: a sandbox that can write
	// the session's parent (a persistent one's sessions root) cannot
	// point these writes elsewhere. At most so many names: a sandbox that
	// can write bin/ too could fill it.
	names, err := hostilefs.ListDir(s.binFd, maxBinEntries+len(specs))
	if err != nil {
		return fmt.Errorf("bridge: %w", err)
	}
	for _, n := range names {
		if !keep[n] {
			unix.Unlinkat(s.binFd, n, 0)
		}
	}
	return nil
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
	if err := sandbox.GrantSession(sandbox.SessionDirs(s.layout), uid, gid); err != nil {
		return fmt.Errorf("bridge: %w", err)
	}
	return nil
}

// ID returns the session's id: GATEBRIDGE_SESSION_ID inside, and
// [gates.Call].SessionID of the calls it answers.
func (s *Session) ID() string { return s.id }

// Dirs returns the host paths of the session directory.
func (s *Session) Dirs() mailbox.Layout { return s.layout }

// WatchMode returns how the session notices calls: events or poll.
func (s *Session) WatchMode() WatchMode { return s.srv.mode }

// Dispatcher returns the session's dispatcher, for a second transport
// (a protocol server) that answers calls beside the mailbox.
func (s *Session) Dispatcher() *Dispatcher { return s.d }

// env is the environment the wrappers need besides the paths a backend
// sets (see sessionEnv): the wake mode and how long a wrapper
// waits for the host before giving up with exit 124.
func (s *Session) env() []string {
	wake := mailbox.WakeFIFO
	if s.srv.mode == WatchPoll {
		wake = mailbox.WakePoll
	}
	maxT := s.cfg.Limits.GateTimeout
	for _, sp := range s.cfg.Gates.Specs() {
		maxT = max(maxT, sp.Timeout)
	}
	wait := int(math.Ceil((maxT + 30*time.Second).Seconds()))
	return []string{
		mailbox.EnvWake + "=" + wake,
		mailbox.EnvWaitTimeout + "=" + strconv.Itoa(wait),
		mailbox.EnvSessionID + "=" + s.id,
	}
}

func (s *Session) logf(format string, args ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, args...)
	}
}

// Close stops answering, cancels the gates still running and waits for
// them (up to a second: a gate that ignores cancellation is reported and
// left running), and removes the session directory unless Config.Keep.
func (s *Session) Close() error { return s.CloseWithin(hostilefs.RemoveMaxTime) }

// CloseWithin is [Session.Close] spending at most d on the removal of the
// session directory: what something still writes there (a persistent
// sandbox's process) is left for the prune of a later [Open] in this
// process (at most one a minute per parent) or of the next gatebridge.
func (s *Session) CloseWithin(d time.Duration) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.closed = true
	s.mu.Unlock()
	s.stopWatch()
	s.srv.close()
	err := s.d.Close(time.Second)
	if n := s.srv.ignoredCalls(); n > 1 {
		s.d.Record(CallRecord{Decision: DecisionRejected, ExitCode: gates.ExitDenied, Start: time.Now(),
			Error: fmt.Sprintf("%d call entries refused while the call table was full (%s)", n, s.cfg.limitNote("max_calls"))})
	}
	s.box.close()
	s.binMu.Lock() // a registry change in flight has finished writing
	unix.Close(s.binFd)
	s.binFd = -1
	s.binMu.Unlock()
	if !s.cfg.Keep {
		// RemoveTree, not os.RemoveAll: the sandbox may have left
		// directories it made unreadable (chmod 000).
		if rerr := hostilefs.RemoveTreeWithin(s.layout.Root, d); rerr != nil {
			err = errors.Join(err, fmt.Errorf("bridge: remove session dir %s: %w", s.layout.Root, rerr))
		}
	}
	s.lease.release(s.cfg.Keep)
	return err
}

// Run runs spec in backend with this session mounted, answers the calls the
// command makes, and returns when the command has exited and every call it
// published has been answered. spec.Session is set to the session's dirs
// and spec.SessionEnv to the mailbox's names for them; the session's env
// comes before spec.Env, so the caller's (and then the backend's own)
// settings win, but for a backend that forces polling
// ([sandbox.WakeForcer]) the wrappers poll. When ctx is cancelled, gates still running
// are cancelled (exit 124) and the session stops answering calls; only
// Close remains to be called (a later Run returns [ErrClosed]).
func (s *Session) Run(ctx context.Context, backend sandbox.Backend, spec sandbox.Spec) (*Result, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed || s.srv.ctx.Err() != nil {
		// After a cancelled Run the session answers no more calls: running
		// another command would leave its gate calls waiting for nothing.
		return nil, ErrClosed
	}
	spec.Session = sandbox.SessionDirs(s.layout)
	spec.SessionEnv = sessionEnv
	spec.Env = sandbox.MergeEnv(s.env(), spec.Env)
	if f, ok := backend.(sandbox.WakeForcer); ok && f.ForcePoll(ctx) {
		// Last, over the session's own "fifo" and the caller's: FIFO
		// wake-ups do not reach this backend's commands (Docker
		// Desktop's VM), so the wrappers must poll.
		spec.Env = sandbox.MergeEnv(spec.Env, []string{mailbox.EnvWake + "=" + mailbox.WakePoll})
	}
	var lines *submitLines
	if s.cfg.SubmitLines {
		// Every byte of stdout, not the capture (which keeps only its
		// head and tail): the answer line may come anywhere.
		lines = newSubmitLines(spec.Stdout, int(s.cfg.Limits.MaxArgBytes))
		spec.Stdout = lines
	}
	// The command's output is redacted as it streams (first: the answer
	// line is read from what was redacted), what is held back written
	// when the command is done.
	var redacting []*secrets.Writer
	red := s.cfg.Redact
	if red != nil {
		for _, w := range []*io.Writer{&spec.Stdout, &spec.Stderr} {
			if *w != nil {
				rw := red.Writer(*w)
				redacting = append(redacting, rw)
				*w = rw
			}
		}
	}
	// Result.Calls is this run's: forget the records of earlier runs. Its
	// gates get a fresh parent context, cancelled if the run times out.
	s.d.resetRecords()
	s.srv.dropSlots()
	cancelRun := s.srv.newRun()
	start := time.Now()
	br, err := backend.Run(ctx, &spec)
	if br != nil && br.TimedOut {
		// The command is gone: gates still running for it are cancelled
		// (a command gate's process group killed), so run returns within
		// its timeout plus the kill grace, not when the slowest gate ends.
		cancelRun(errRunEnded)
	}
	if ctx.Err() != nil {
		// Cancelled (gatebridge got SIGINT or SIGTERM): stop the gates in
		// flight instead of waiting up to their timeout for them. The
		// session answers no more calls.
		s.srv.stop()
	}
	s.srv.drain()
	for _, w := range redacting {
		w.Flush()
	}
	if err != nil {
		return nil, err
	}
	br.Stdout, br.Stderr = red.Bytes(br.Stdout), red.Bytes(br.Stderr)
	calls, omitted := s.d.Records()
	res := &Result{
		ExitCode:     br.ExitCode,
		Stdout:       string(br.Stdout),
		StdoutBase64: lossless.Bytes(string(br.Stdout)),
		Stderr:       string(br.Stderr),
		StderrBase64: lossless.Bytes(string(br.Stderr)),
		TimedOut:     br.TimedOut,
		Canceled:     br.Canceled,
		Truncated:    br.Truncated,
		DurationMS:   time.Since(start).Milliseconds(),
		Sandbox:      backend.Name(),
		SandboxInfo:  br.Info,
		Calls:        calls,
		CallsOmitted: omitted,
		CallsIgnored: s.srv.ignoredCalls(),
	}
	if a, ok := s.d.Result(gates.ResultAnswer); ok {
		a = red.String(a)
		res.Answer, res.AnswerBase64 = &a, lossless.Bytes(a)
	} else if a, ok := lines.answer(); ok {
		res.Answer, res.AnswerBase64 = &a, lossless.Bytes(a)
	}
	if s.cfg.Keep {
		res.SessionDir = s.layout.Root
	}
	s.d.audit(CommandRecord{Time: start.UTC(), Session: s.id, Kind: "command", Argv: capArgs(spec.Command, s.d.cfg.Redact),
		ArgvBase64: lossless.List(capArgs(spec.Command, s.d.cfg.Redact)), Backend: backend.Name(), Sandbox: s.cfg.Sandbox,
		ExitCode: br.ExitCode, TimedOut: br.TimedOut, Canceled: br.Canceled,
		DurationMS: time.Since(start).Milliseconds(),
		BytesOut:   int64(len(br.Stdout)+len(br.Stderr)) + br.StdoutDropped + br.StderrDropped})
	return res, nil
}

// CommandRecord is the audit record of one command a session ran in its
// sandbox (kind "command"), next to the records of its gate calls.
type CommandRecord struct {
	Time       time.Time `json:"time"`
	Session    string    `json:"session"`
	Kind       string    `json:"kind"`
	Argv       []string  `json:"argv"` // capped as call arguments are
	ArgvBase64 [][]byte  `json:"argv_base64,omitempty"`
	Backend    string    `json:"backend"`
	// Sandbox names a persistent sandbox the command ran in ("" for one
	// of its own).
	Sandbox    string `json:"sandbox,omitempty"`
	ExitCode   int    `json:"exit_code"`
	TimedOut   bool   `json:"timed_out,omitempty"`
	Canceled   bool   `json:"canceled,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	// BytesOut is what the command wrote to stdout and stderr.
	BytesOut int64 `json:"bytes_out"`
}

// sessionEnv is the [sandbox.Spec.SessionEnv] of every Run: the PATH and
// TMPDIR a backend sets, then the mailbox's names for the session's
// directories as the command sees them.
func sessionEnv(inside sandbox.SessionDirs, basePath string) []string {
	return append(sandbox.PathEnv(inside, basePath), mailbox.DirsEnv(mailbox.Layout(inside))...)
}
