package bridge

import (
	"context"
	"fmt"
	"time"

	"github.com/gatebridge/gatebridge/sandbox"
)

// Result is the outcome of one command run with a session.
type Result struct {
	ExitCode    int               `json:"exit_code"`
	Stdout      string            `json:"stdout"`
	Stderr      string            `json:"stderr"`
	TimedOut    bool              `json:"timed_out"`
	Canceled    bool              `json:"canceled,omitempty"`
	Truncated   bool              `json:"truncated"`
	DurationMS  int64             `json:"duration_ms"`
	Answer      *string           `json:"answer"`
	Sandbox     string            `json:"sandbox"`
	SandboxInfo map[string]string `json:"sandbox_info,omitempty"`
	SessionDir  string            `json:"session_dir,omitempty"` // set when kept
	Calls       []CallRecord      `json:"calls"`
	// CallsOmitted counts this run's calls past bridge.limits.max_records:
	// Calls holds only the first ones.
	CallsOmitted int `json:"calls_omitted,omitempty"`
	// CallsIgnored counts call entries dropped in a flood far past the
	// call limit (see [Session.Ignored]).
	CallsIgnored int `json:"calls_ignored,omitempty"`
}

// Run runs spec in backend with this session mounted, answers the calls the
// command makes, and returns when the command has exited and every call it
// published has been answered. spec.Session is set to the session's dirs
// and the session's env is appended to spec.Env. When ctx is cancelled,
// gates still running are cancelled (exit 124) and the session stops
// answering calls; only Close remains to be called (a later Run returns
// [ErrClosed]).
func (s *Session) Run(ctx context.Context, backend sandbox.Backend, spec sandbox.Spec) (*Result, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed || s.ctx.Err() != nil {
		// After a cancelled Run the session answers no more calls: running
		// another command would leave its gate calls waiting for nothing.
		return nil, ErrClosed
	}
	spec.Session = s.dirs
	spec.Env = append(append([]string(nil), spec.Env...), s.Env()...)
	// Result.Calls is this run's: forget the records of earlier runs. Its
	// gates get a fresh parent context, cancelled if the run times out.
	s.mu.Lock()
	s.records, s.omitted = nil, 0
	s.gcancel() // nothing is in flight between runs (Drain)
	s.gctx, s.gcancel = context.WithCancel(s.ctx)
	gcancel := s.gcancel
	s.mu.Unlock()
	start := time.Now()
	br, err := backend.Run(ctx, &spec)
	if br != nil && br.TimedOut {
		// The command is gone: gates still running for it are cancelled
		// (a command gate's process group killed), so run returns within
		// its timeout plus the kill grace, not when the slowest gate ends.
		gcancel()
	}
	if ctx.Err() != nil {
		// Cancelled (gatebridge got SIGINT or SIGTERM): stop the gates in
		// flight instead of waiting up to their timeout for them. The
		// session answers no more calls.
		s.cancel()
	}
	s.Drain()
	if err != nil {
		return nil, err
	}
	res := &Result{
		ExitCode:     br.ExitCode,
		Stdout:       string(br.Stdout),
		Stderr:       string(br.Stderr),
		TimedOut:     br.TimedOut,
		Canceled:     br.Canceled,
		Truncated:    br.Truncated,
		DurationMS:   time.Since(start).Milliseconds(),
		Sandbox:      backend.Name(),
		SandboxInfo:  br.Info,
		Calls:        s.Calls(),
		CallsOmitted: s.CallsOmitted(),
		CallsIgnored: s.Ignored(),
	}
	if a, ok := s.Answer(); ok {
		res.Answer = &a
	}
	if s.cfg.Keep {
		res.SessionDir = s.dirs.Root
	}
	return res, nil
}

// Run opens a session with cfg, runs spec in backend, and closes the
// session (removing its directory unless cfg.Keep).
func Run(ctx context.Context, cfg Config, backend sandbox.Backend, spec sandbox.Spec) (*Result, error) {
	s, err := Open(cfg)
	if err != nil {
		return nil, err
	}
	res, err := s.Run(ctx, backend, spec)
	if cerr := s.Close(); cerr != nil && err == nil && !cfg.Keep {
		err = fmt.Errorf("close session: %w", cerr)
	}
	return res, err
}
