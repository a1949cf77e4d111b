package sandbox

import (
	"context"
	"errors"
	"time"
)

// errTimedOut is the cause of a Stopper's context when Spec.Timeout passed.
var errTimedOut = errors.New("sandbox: command timed out")

// Stopper is the stop sequence every backend runs around a command (see
// the package contract): when [Spec.Timeout] passes or ctx is done, term;
// [Spec.KillGrace] later, if the command still runs, kill; nothing after
// that. [Stopper.Finish] then gives the [Result] its 124 or 130.
//
// It starts no goroutine of its own: the backend's supervising loop
// selects on [Stopper.C] beside its own cases and calls [Stopper.Step]
// when it is ready:
//
//	st := sandbox.NewStopper(ctx, spec, term, kill)
//	defer st.Close()
//	for running {
//		select {
//		case <-exited:
//			running = false
//		case <-st.C():
//			st.Step()
//		case sig := <-spec.Signals:
//			forward(sig) // at any stage, the grace included
//		}
//	}
//	st.Finish(res)
//
// term and kill run on the caller's goroutine, inside Step; the grace
// counts from the moment term returns. A Stopper is used by one goroutine.
type Stopper struct {
	ctx      context.Context // done at the timeout (cause errTimedOut) or with the caller's ctx
	cancel   context.CancelFunc
	term     func()
	kill     func()
	grace    time.Duration
	graceT   *time.Timer
	graceC   chan struct{} // closed when the grace has passed
	stage    stopStage
	timedOut bool
	closed   bool
}

type stopStage uint8

const (
	stageRunning stopStage = iota
	stageTerminated
	stageKilled
)

// NewStopper returns the stop sequence of a command run under spec: term
// sends SIGTERM (or the backend's equivalent) to every process of the
// command, kill sends SIGKILL. Call [Stopper.Close] when the command is
// gone.
func NewStopper(ctx context.Context, spec *Spec, term, kill func()) *Stopper {
	s := &Stopper{ctx: ctx, cancel: func() {}, term: term, kill: kill, grace: killGrace(spec)}
	if spec.Timeout > 0 {
		// A deadline of ctx's own that comes first is ctx's: the command
		// is then cancelled (130), as when ctx is cancelled.
		s.ctx, s.cancel = context.WithTimeoutCause(ctx, spec.Timeout, errTimedOut)
	}
	return s
}

// killGrace is spec's time between SIGTERM and SIGKILL.
func killGrace(spec *Spec) time.Duration {
	if spec.KillGrace <= 0 {
		return DefaultKillGrace
	}
	return spec.KillGrace
}

// C is ready when the next step is due: before the stop, when the timeout
// passes or ctx is done; after term, when the grace has passed. It is nil
// (never ready) once kill was sent. Call C afresh for every select.
func (s *Stopper) C() <-chan struct{} {
	if s.closed {
		return nil
	}
	switch s.stage {
	case stageRunning:
		return s.ctx.Done()
	case stageTerminated:
		return s.graceC
	}
	return nil
}

// Step takes the step that [Stopper.C] announced: term at the timeout or
// cancellation, kill at the end of the grace. It does nothing when no step
// is due, and nothing once kill was sent.
func (s *Stopper) Step() {
	if s.closed {
		return
	}
	switch s.stage {
	case stageRunning:
		if s.ctx.Err() != nil {
			s.begin(errors.Is(context.Cause(s.ctx), errTimedOut))
		}
	case stageTerminated:
		select {
		case <-s.graceC:
			s.stage = stageKilled
			s.kill()
		default:
		}
	}
}

// Stop begins the sequence now, for a reason of the backend's own (the
// command writes more than the host reads): it counts as a cancellation
// (Result.Canceled, exit 130). It does nothing once the sequence has begun.
func (s *Stopper) Stop() {
	if s.stage == stageRunning && !s.closed {
		s.begin(false)
	}
}

func (s *Stopper) begin(timedOut bool) {
	s.stage, s.timedOut = stageTerminated, timedOut
	s.term()
	c := make(chan struct{})
	s.graceC = c
	s.graceT = time.AfterFunc(s.grace, func() { close(c) })
}

// Grace is the time between term and kill ([Spec.KillGrace], or
// [DefaultKillGrace]): a backend gives what the command left behind as
// long once the command is gone.
func (s *Stopper) Grace() time.Duration { return s.grace }

// Stopped reports whether the sequence has begun (term was sent): the
// command's end is then the Stopper's doing.
func (s *Stopper) Stopped() bool { return s.stage != stageRunning }

// Killed reports whether kill was sent. A backend that cannot trust the
// command to end after it (a remote agent, an engine) bounds its wait from
// here.
func (s *Stopper) Killed() bool { return s.stage == stageKilled }

// Finish marks r when the Stopper stopped the command: TimedOut and
// [ExitTimedOut] after the timeout, Canceled and [ExitCanceled] after ctx
// (or [Stopper.Stop]), whatever status the command ended with. A command
// that ended by itself keeps r as it is.
func (s *Stopper) Finish(r *Result) {
	if !s.Stopped() {
		return
	}
	r.TimedOut, r.Canceled = s.timedOut, !s.timedOut
	r.ExitCode = ExitCanceled
	if s.timedOut {
		r.ExitCode = ExitTimedOut
	}
}

// Close releases the timers; no step is taken after it (C is nil, Step
// and Stop do nothing), and Finish still tells what happened.
func (s *Stopper) Close() {
	s.closed = true
	s.cancel()
	if s.graceT != nil {
		s.graceT.Stop()
	}
}
