package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/wrappers"
)

// Decisions recorded for each call attempt.
const (
	DecisionRan      = "ran"       // the gate ran (whatever its exit code)
	DecisionDenied   = "denied"    // the gate refused by policy (exit 126)
	DecisionRejected = "rejected"  // the call itself was malformed or over a limit
	DecisionTimedOut = "timed_out" // the gate outlived its timeout (exit 124)
	DecisionUnknown  = "unknown"   // no such gate (exit 127)
	DecisionCanceled = "canceled"  // the run ended (timeout, interrupt) while the gate ran (exit 124)
)

// errRunEnded cancels the gates of a run that timed out or was cancelled.
var errRunEnded = fmt.Errorf("cancelled: the command's run ended (timeout or interrupt): %w", context.Canceled)

// CallRecord describes one call attempt.
type CallRecord struct {
	ID       string        `json:"id"`
	Gate     string        `json:"gate"`
	Args     []string      `json:"args"` // capped: 64 args of 256 bytes each
	ExitCode int           `json:"exit_code"`
	Decision string        `json:"decision"`
	Start    time.Time     `json:"-"`
	Duration time.Duration `json:"-"`
	// DurationMS is Duration in milliseconds (for JSON).
	DurationMS float64 `json:"duration_ms"`
	BytesIn    int64   `json:"bytes_in"`  // args + stdin
	BytesOut   int64   `json:"bytes_out"` // stdout + stderr
	Error      string  `json:"error,omitempty"`
}

// textMax is the largest output the wrapper prints with shell builtins
// (cheaper than starting cat below about 1 KiB, see package wrappers).
const textMax = 1024

type request struct {
	gate  string
	args  []string
	stdin []byte
	bytes int64
}

// readCall reads gate, args/ and stdin of a claimed call, enforcing limits.
func (s *Session) readCall(dirFd int) (*request, error) {
	lim := s.cfg.Limits
	gate, err := readFileAt(dirFd, "gate", wrappers.MaxNameLen)
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return nil, fmt.Errorf("gate name longer than %d bytes", wrappers.MaxNameLen)
		}
		return nil, fmt.Errorf("call %w", err)
	}
	req := &request{gate: string(gate), bytes: int64(len(gate))}
	argsFd, err := openDirAt(dirFd, "args")
	switch {
	case err == nil:
		defer unix.Close(argsFd)
		names, err := readDirNames(argsFd, lim.MaxArgs)
		if err != nil {
			return nil, fmt.Errorf("call args: %w", err)
		}
		if len(names) > lim.MaxArgs {
			return nil, &limitError{fmt.Sprintf("more than %d arguments", lim.MaxArgs), "max_args"}
		}
		req.args = make([]string, len(names))
		seen := make([]bool, len(names))
		for _, n := range names {
			i, err := strconv.Atoi(n)
			if err != nil || i < 0 || i >= len(names) || strconv.Itoa(i) != n || seen[i] {
				return nil, fmt.Errorf("call args: unexpected entry %s (want files 0..%d)", quoteCap(n, 32), len(names)-1)
			}
			seen[i] = true
			b, err := readFileAt(argsFd, n, lim.MaxArgBytes-req.bytes)
			if err != nil {
				if errors.Is(err, ErrTooLarge) {
					return nil, &limitError{fmt.Sprintf("arguments exceed %d bytes", lim.MaxArgBytes), "max_arg_bytes"}
				}
				return nil, fmt.Errorf("call args/%w", err)
			}
			if bytes.IndexByte(b, 0) >= 0 {
				return nil, fmt.Errorf("call args/%s contains a NUL byte", n)
			}
			req.args[i] = string(b)
			req.bytes += int64(len(b))
		}
	case errors.Is(err, unix.ENOENT):
		// no args/ directory: no arguments
	default:
		return nil, fmt.Errorf("call %w", err)
	}
	stdin, err := readFileAt(dirFd, "stdin", lim.MaxStdinBytes)
	switch {
	case err == nil:
		req.stdin = stdin
		req.bytes += int64(len(stdin))
	case errors.Is(err, unix.ENOENT):
	case errors.Is(err, ErrTooLarge):
		return nil, &limitError{fmt.Sprintf("stdin exceeds %d bytes", lim.MaxStdinBytes), "max_stdin_bytes"}
	default:
		return nil, fmt.Errorf("call %w", err)
	}
	return req, nil
}

type limitError struct {
	what string
	key  string
}

func (e *limitError) Error() string {
	return fmt.Sprintf("%s (limit set by bridge.limits.%s)", e.what, e.key)
}

// handle answers one claimed call.
func (s *Session) handle(c *call) {
	req, err := s.readCall(c.dirFd)
	if err != nil {
		code := gates.ExitUsage
		var le *limitError
		if errors.As(err, &le) || errors.Is(err, ErrSymlink) || errors.Is(err, ErrNotRegular) || errors.Is(err, ErrHardLink) || errors.Is(err, ErrNotDir) {
			code = gates.ExitDenied
		}
		s.reject(c.id, c.dirFd, c.start, code, err)
		return
	}
	rec := CallRecord{ID: c.id, Gate: req.gate, Args: capArgs(req.args), Start: c.start, BytesIn: req.bytes}
	g, err := s.cfg.Gates.Lookup(req.gate)
	if err != nil {
		rec.Decision, rec.ExitCode = DecisionUnknown, gates.ExitUnknown
		msg := fmt.Sprintf("unknown gate %s", quoteCap(req.gate, 64))
		rec.Error = msg
		s.respond(c, &rec, nil, []byte("gatebridge: "+msg+"\n"))
		return
	}
	spec := g.Spec()
	stdout := newCapBuf(s.cfg.Limits.MaxOutputBytes)
	stderr := newCapBuf(s.cfg.Limits.MaxOutputBytes)
	timeout := spec.Timeout
	if timeout <= 0 {
		timeout = s.cfg.Limits.GateTimeout
	}
	code, gerr := s.invoke(g, timeout, &gates.Call{
		SessionID: s.id, ID: c.id, Args: req.args, Stdin: req.stdin,
		Stdout: stdout, Stderr: stderr, SetAnswer: s.setAnswer,
	})
	out, errOut := stdout.Bytes(), stderr.Bytes()
	rec.ExitCode = code
	rec.Decision = DecisionRan
	switch {
	case errors.Is(gerr, context.DeadlineExceeded):
		rec.Decision = DecisionTimedOut
		rec.Error = fmt.Sprintf("timed out after %v", timeout)
		source := "gate timeout, bridge.limits.gate_timeout"
		if spec.Timeout > 0 {
			source = "gate timeout, set by the gate itself"
		}
		errOut = appendMsg(errOut, fmt.Sprintf("gatebridge: %s: timed out after %v (%s)", req.gate, timeout, source))
	case errors.Is(gerr, errRunEnded):
		rec.Decision = DecisionCanceled
		rec.Error = gerr.Error()
		errOut = appendMsg(errOut, "gatebridge: "+req.gate+": "+gerr.Error())
	case gerr != nil:
		rec.Error = gerr.Error()
		if code == gates.ExitDenied {
			rec.Decision = DecisionDenied
		}
		errOut = appendMsg(errOut, "gatebridge: "+req.gate+": "+strings.TrimPrefix(gerr.Error(), req.gate+": "))
	}
	if stdout.Dropped() > 0 || stderr.Dropped() > 0 {
		errOut = appendMsg(errOut, fmt.Sprintf("gatebridge: %s: output truncated: %d bytes dropped (bridge.limits.max_output_bytes=%d)",
			req.gate, stdout.Dropped()+stderr.Dropped(), s.cfg.Limits.MaxOutputBytes))
	}
	s.respond(c, &rec, out, errOut)
}

func appendMsg(b []byte, msg string) []byte {
	if len(b) > 0 && b[len(b)-1] != '\n' {
		b = append(b, '\n')
	}
	return append(append(b, msg...), '\n')
}

// invoke runs the gate with a timeout, recovering panics. A gate that
// ignores its context is abandoned at the deadline (plus a short grace) so
// the caller still gets exit 124.
func (s *Session) invoke(g gates.Gate, timeout time.Duration, c *gates.Call) (int, error) {
	s.mu.Lock()
	parent := s.gctx
	s.mu.Unlock()
	// A slot of max_concurrent is held until the gate really returns, even
	// when the caller was answered 124 and the gate abandoned: a gate that
	// ignores its context cannot make the host run more than max_concurrent.
	// The gate's timeout starts once it has a slot.
	select {
	case s.slots <- struct{}{}:
	case <-parent.Done():
		return s.ctxExit(parent)
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	type res struct {
		code int
		err  error
	}
	done := make(chan res, 1)
	s.gateWG.Add(1)
	go func() {
		defer s.gateWG.Done()
		defer func() { <-s.slots }()
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
		return s.ctxExit(ctx)
	}
	return gates.ExitCodeOf(r.code, r.err), r.err
}

func (s *Session) ctxExit(ctx context.Context) (int, error) {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return gates.ExitTimeout, context.DeadlineExceeded
	}
	return gates.ExitTimeout, errRunEnded
}

// reject answers a call that could not be read or was over a limit.
func (s *Session) reject(id string, dirFd int, start time.Time, code int, err error) {
	msg := err.Error()
	rec := CallRecord{ID: id, Decision: DecisionRejected, ExitCode: code, Error: msg, Start: start}
	s.respond(&call{id: id, dirFd: dirFd, start: start}, &rec, nil, []byte("gatebridge: "+msg+"\n"))
}

// respond writes the response files, exit code last, wakes the wrapper,
// removes the call directory and records the call.
func (s *Session) respond(c *call, rec *CallRecord, stdout, stderr []byte) {
	s.deliver(c, rec, stdout, stderr)
	s.record(*rec)
}

// deliver is respond without recording: it fills rec's outcome, bytes and
// duration.
func (s *Session) deliver(c *call, rec *CallRecord, stdout, stderr []byte) {
	if !s.reserve(c.id, int64(len(stdout)+len(stderr))) {
		msg := fmt.Sprintf("response of %d bytes refused: the session already holds %d bytes of unread responses (limit set by bridge.limits.max_session_bytes=%d)",
			len(stdout)+len(stderr), s.held(), s.cfg.Limits.MaxSessionBytes)
		rec.ExitCode, rec.Decision = gates.ExitDenied, DecisionRejected
		rec.Error = strings.TrimSpace(rec.Error + "; " + msg)
		stdout, stderr = nil, []byte("gatebridge: "+msg+"\n")
		s.reserveAnyway(c.id, int64(len(stderr)))
	}
	rec.BytesOut = int64(len(stdout) + len(stderr))
	werr := s.writeResponse(c.id, rec.ExitCode, stdout, stderr)
	if werr != nil {
		rec.Error = strings.TrimSpace(rec.Error + "; " + werr.Error())
		// Session filesystem full (or the like): drop what was written and
		// try a short error answer, so the caller neither reads a partial
		// response as complete nor waits for an exit file that never comes.
		for _, ext := range []string{".stdout", ".stderr", ".text"} {
			unix.Unlinkat(s.respFd, c.id+ext, 0)
		}
		rec.ExitCode = gates.ExitFailure
		msg := []byte("gatebridge: cannot write the response: " + werr.Error() + "\n")
		rec.BytesOut = int64(len(msg))
		if err := s.writeResponse(c.id, rec.ExitCode, nil, msg); err != nil {
			rec.Error += "; error response: " + err.Error()
		}
	}
	if c.dirFd >= 0 {
		if err := wakeAt(c.dirFd, "wake"); err != nil && werr == nil {
			rec.Error = strings.TrimSpace(rec.Error + " (wake: " + err.Error() + ")")
		}
	}
	budget := s.cfg.Limits.MaxArgs + 64
	removeAllAt(s.callsFd, c.id, &budget)
	rec.Duration = time.Since(c.start)
	rec.DurationMS = float64(rec.Duration.Microseconds()) / 1000
}

// responseExts are the files of one response.
var responseExts = []string{".stdout", ".stderr", ".text", ".exit"}

// reserve accounts n response bytes for call id against
// max_session_bytes; false when they do not fit.
func (s *Session) reserve(id string, n int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n > 0 && s.heldBytes+n > s.cfg.Limits.MaxSessionBytes {
		return false
	}
	s.holdLocked(id, n)
	return true
}

// reserveAnyway accounts a short refusal message past the cap.
func (s *Session) reserveAnyway(id string, n int64) {
	s.mu.Lock()
	s.holdLocked(id, n)
	s.mu.Unlock()
}

func (s *Session) holdLocked(id string, n int64) {
	s.heldBytes += n - s.respBytes[id]
	s.respBytes[id] = n
	s.peakHeld = max(s.peakHeld, s.heldBytes)
}

func (s *Session) held() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heldBytes
}

// errCallLimit is the refusal of a call past bridge.limits.max_calls.
func (s *Session) errCallLimit() error {
	return &limitError{fmt.Sprintf("session call limit reached (%d calls)", s.cfg.Limits.MaxCalls), "max_calls"}
}

func (s *Session) writeResponse(id string, code int, stdout, stderr []byte) error {
	suffix := strconv.FormatUint(atomic.AddUint64(&s.tmpSerial, 1), 36)
	if len(stdout) > 0 {
		if err := writeFileAtomic(s.respFd, id+".stdout", stdout, suffix); err != nil {
			return fmt.Errorf("response: %w", err)
		}
	}
	if len(stderr) > 0 {
		if err := writeFileAtomic(s.respFd, id+".stderr", stderr, suffix); err != nil {
			return fmt.Errorf("response: %w", err)
		}
	}
	if len(stdout)+len(stderr) <= textMax && bytes.IndexByte(stdout, 0) < 0 && bytes.IndexByte(stderr, 0) < 0 {
		if err := writeFileAtomic(s.respFd, id+".text", nil, suffix); err != nil {
			return fmt.Errorf("response: %w", err)
		}
	}
	if code < 0 || code > 255 {
		code = gates.ExitFailure
	}
	if err := writeFileAtomic(s.respFd, id+".exit", []byte(strconv.Itoa(code)+"\n"), suffix); err != nil {
		return fmt.Errorf("response: %w", err)
	}
	return nil
}

func capArgs(args []string) []string {
	n := min(len(args), 64)
	out := make([]string, n, n+1)
	for i := range n {
		a := args[i]
		if len(a) > 256 {
			a = a[:256] + "…"
		}
		out[i] = a
	}
	if len(args) > n {
		out = append(out, fmt.Sprintf("… %d more", len(args)-n))
	}
	return out
}

func quoteCap(s string, n int) string {
	if len(s) > n {
		return strconv.Quote(s[:n]) + "…"
	}
	return strconv.Quote(s)
}

// capBuf is a goroutine-safe buffer that keeps the first max bytes.
type capBuf struct {
	mu      sync.Mutex
	b       []byte
	max     int64
	dropped int64
}

func newCapBuf(max int64) *capBuf { return &capBuf{max: max} }

func (c *capBuf) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.max - int64(len(c.b))
	if room >= int64(len(p)) {
		c.b = append(c.b, p...)
	} else {
		if room > 0 {
			c.b = append(c.b, p[:room]...)
		}
		c.dropped += int64(len(p)) - max(room, 0)
	}
	return len(p), nil
}

func (c *capBuf) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.b...)
}

func (c *capBuf) Dropped() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped
}
