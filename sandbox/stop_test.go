package sandbox_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox"
)

// stopRecorder is a command as a Stopper sees it: term and kill are
// recorded with the time they came; exited is closed when the command
// ends (the test decides when).
type stopRecorder struct {
	start  time.Time
	steps  []string
	at     []time.Duration
	exited chan struct{}
	// exitOnTerm ends the command when term comes (it obeys SIGTERM).
	exitOnTerm bool
}

func newStopRecorder() *stopRecorder {
	return &stopRecorder{start: time.Now(), exited: make(chan struct{})}
}

func (r *stopRecorder) record(step string) {
	r.steps = append(r.steps, step)
	r.at = append(r.at, time.Since(r.start))
	if step == "term" && r.exitOnTerm {
		close(r.exited)
	}
}

func (r *stopRecorder) stopper(ctx context.Context, spec *sandbox.Spec) *sandbox.Stopper {
	return sandbox.NewStopper(ctx, spec, func() { r.record("term") }, func() { r.record("kill") })
}

// want fails t unless the steps taken are steps.
func (r *stopRecorder) want(t *testing.T, steps ...string) {
	t.Helper()
	if !slices.Equal(r.steps, steps) {
		t.Fatalf("steps %q, want %q", r.steps, steps)
	}
}

// supervise is a backend's loop: it runs until the command exits, or, for
// a command that nothing ends (it ignores SIGKILL, as a lost container
// would), until kill was sent; bound fails the test when neither comes.
func (r *stopRecorder) supervise(t *testing.T, st *sandbox.Stopper, bound time.Duration) {
	t.Helper()
	safety := time.After(bound)
	for !st.Killed() {
		select {
		case <-r.exited:
			return
		case <-st.C():
			st.Step()
		case <-safety:
			t.Fatalf("no end after %v; steps %q", bound, r.steps)
		}
	}
}

// wantFinish checks the Result Finish makes of a command that ended with
// status own: want, with TimedOut and Canceled to match.
func wantFinish(t *testing.T, st *sandbox.Stopper, own, want int) {
	t.Helper()
	res := &sandbox.Result{ExitCode: own}
	st.Finish(res)
	if res.ExitCode != want || res.TimedOut != (want == sandbox.ExitTimedOut) || res.Canceled != (want == sandbox.ExitCanceled) {
		t.Errorf("Finish of a command ending %d: %+v, want exit %d", own, res, want)
	}
}

// TestStopperTimeout: at the timeout, term; the grace later, kill; then
// nothing more (C is nil, further Steps and Stop do nothing), and the
// result says 124, whatever the command's own status.
func TestStopperTimeout(t *testing.T) {
	const timeout, grace = 50 * time.Millisecond, 150 * time.Millisecond
	r := newStopRecorder()
	st := r.stopper(context.Background(), &sandbox.Spec{Timeout: timeout, KillGrace: grace})
	defer st.Close()
	r.supervise(t, st, 10*time.Second)
	r.want(t, "term", "kill")
	if r.at[0] < timeout {
		t.Errorf("term at %v, before the timeout %v", r.at[0], timeout)
	}
	if d := r.at[1] - r.at[0]; d < grace {
		t.Errorf("kill %v after term, before the grace %v", d, grace)
	}
	if st.C() != nil {
		t.Error("C() is not nil after kill")
	}
	st.Step()
	st.Stop()
	time.Sleep(2 * grace)
	st.Step()
	if len(r.steps) != 2 {
		t.Errorf("steps %q after kill", r.steps)
	}
	wantFinish(t, st, 128+9, sandbox.ExitTimedOut)
}

// TestStopperCancel: ctx done → term; a command that obeys it gets no
// kill, even once the grace has passed; the result says 130.
func TestStopperCancel(t *testing.T) {
	const grace = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	r := newStopRecorder()
	r.exitOnTerm = true
	st := r.stopper(ctx, &sandbox.Spec{Timeout: time.Hour, KillGrace: grace})
	time.AfterFunc(20*time.Millisecond, cancel)
	r.supervise(t, st, 10*time.Second)
	st.Close()
	time.Sleep(2 * grace)
	if st.C() != nil {
		t.Error("C() is not nil after Close")
	}
	st.Step()
	r.want(t, "term")
	wantFinish(t, st, 128+15, sandbox.ExitCanceled)
}

// TestStopperExitFirst: a command that ends before the timeout sees no
// step, and its result is its own.
func TestStopperExitFirst(t *testing.T) {
	r := newStopRecorder()
	st := r.stopper(context.Background(), &sandbox.Spec{Timeout: time.Hour, KillGrace: time.Millisecond})
	time.AfterFunc(20*time.Millisecond, func() { close(r.exited) })
	r.supervise(t, st, 10*time.Second)
	st.Step() // no step is due
	st.Close()
	if len(r.steps) != 0 || st.Stopped() {
		t.Fatalf("steps %q, Stopped %v", r.steps, st.Stopped())
	}
	wantFinish(t, st, 3, 3)
}

// TestStopperTimeoutThenCancel: once the timeout has begun the sequence,
// ctx's end adds nothing (no second term) and the result stays 124.
func TestStopperTimeoutThenCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := newStopRecorder()
	st := r.stopper(ctx, &sandbox.Spec{Timeout: 20 * time.Millisecond, KillGrace: 100 * time.Millisecond})
	defer st.Close()
	<-st.C()
	st.Step()
	cancel()
	r.supervise(t, st, 10*time.Second)
	r.want(t, "term", "kill")
	wantFinish(t, st, 0, sandbox.ExitTimedOut)
}

// TestStopperCtxDeadline: a deadline of ctx's own that comes before
// Spec.Timeout is a cancellation (130), not the command's timeout.
func TestStopperCtxDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	r := newStopRecorder()
	r.exitOnTerm = true
	st := r.stopper(ctx, &sandbox.Spec{Timeout: time.Hour})
	defer st.Close()
	r.supervise(t, st, 10*time.Second)
	wantFinish(t, st, 0, sandbox.ExitCanceled)
}

// TestStopperStop: Stop begins the sequence at once, as a cancellation;
// a second Stop, and the timeout after it, add nothing.
func TestStopperStop(t *testing.T) {
	r := newStopRecorder()
	st := r.stopper(context.Background(), &sandbox.Spec{Timeout: 30 * time.Millisecond, KillGrace: 100 * time.Millisecond})
	defer st.Close()
	st.Stop()
	st.Stop()
	if !slices.Equal(r.steps, []string{"term"}) || !st.Stopped() || st.Killed() {
		t.Fatalf("steps %q, Stopped %v, Killed %v", r.steps, st.Stopped(), st.Killed())
	}
	r.supervise(t, st, 10*time.Second)
	r.want(t, "term", "kill")
	wantFinish(t, st, 0, sandbox.ExitCanceled)
}

// TestStopperNoTimeout: with no timeout and a ctx that never ends, C is
// never ready.
func TestStopperNoTimeout(t *testing.T) {
	r := newStopRecorder()
	st := r.stopper(context.Background(), &sandbox.Spec{})
	defer st.Close()
	select {
	case <-st.C():
		t.Fatal("C() ready with no timeout and no cancellation")
	case <-time.After(50 * time.Millisecond):
	}
}
