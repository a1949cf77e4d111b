package sandboxtest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gatebridge/gatebridge/sandbox"
)

// RunTTY is the suite of a backend that runs commands on a
// pseudo-terminal ([sandbox.Spec.TTY], [sandbox.TTYRunner]). A backend
// that says it cannot (TTYSupport) fails it: call it only for those that
// should.
func RunTTY(t *testing.T, newBackend func(t *testing.T) sandbox.Backend, opt Options) {
	if opt.NoLeftovers == nil {
		opt.NoLeftovers = HostNoLeftovers
	}
	s := &suite{opt: opt, newBackend: newBackend}
	for _, tc := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"IsTerminal", s.ttyIsTerminal},
		{"NotTerminalWithout", s.ttyNotWithout},
		{"Size", s.ttySize},
		{"Resize", s.ttyResize},
		{"Stdin", s.ttyStdin},
		{"OneStream", s.ttyOneStream},
		{"OwnControllingTerminal", s.ttyOwnCtty},
		{"ExitCode", s.ttyExit},
		{"Timeout", s.ttyTimeout},
		{"OutputCap", s.ttyOutputCap},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := sandbox.TTYSupport(newBackend(t)); err != nil {
				t.Fatalf("TTYSupport: %v", err)
			}
			if !opt.Serial {
				t.Parallel()
			}
			tc.fn(t)
		})
	}
}

// CRLF undoes the terminal's output processing (\n → \r\n).
func CRLF(b []byte) string { return strings.ReplaceAll(string(b), "\r\n", "\n") }

func (f *Fixture) ttySpec(script string) *sandbox.Spec {
	spec := f.Spec(script)
	spec.TTY = &sandbox.TTYSize{Rows: 24, Cols: 80}
	return spec
}

func (s *suite) ttyIsTerminal(t *testing.T) {
	f := NewFixture(t, s.opt)
	res := s.run(t, context.Background(), f.ttySpec("test -t 0 && test -t 1 && test -t 2 && echo all-terminal"))
	wantExit(t, res, 0)
	if got := CRLF(res.Stdout); got != "all-terminal\n" {
		t.Errorf("stdout %q", got)
	}
}

func (s *suite) ttyNotWithout(t *testing.T) {
	f := NewFixture(t, s.opt)
	res := s.run(t, context.Background(), f.Spec("test -t 0 || test -t 1 || echo no-terminal"))
	wantExit(t, res, 0)
	if got := string(res.Stdout); got != "no-terminal\n" {
		t.Errorf("stdout %q", got)
	}
}

func (s *suite) ttySize(t *testing.T) {
	f := NewFixture(t, s.opt)
	spec := f.ttySpec("stty size")
	spec.TTY = &sandbox.TTYSize{Rows: 33, Cols: 101}
	res := s.run(t, context.Background(), spec)
	wantExit(t, res, 0)
	if got := CRLF(res.Stdout); got != "33 101\n" {
		t.Errorf("stty size printed %q, want %q", got, "33 101\n")
	}
}

// ttyResize: a resize changes what stty reports (and sends SIGWINCH).
func (s *suite) ttyResize(t *testing.T) {
	f := NewFixture(t, s.opt)
	spec := f.ttySpec(`trap 'echo "winch $(stty size)"; exit 0' WINCH; echo ready; while :; do sleep 0.05; done`)
	resize := make(chan sandbox.TTYSize, 1)
	spec.Resize = resize
	var out Buffer
	spec.Stdout = &out
	go func() {
		if Poll(safety, func() bool { return strings.Contains(out.String(), "ready") }) {
			resize <- sandbox.TTYSize{Rows: 50, Cols: 132}
		}
	}()
	res := s.run(t, context.Background(), spec)
	wantExit(t, res, 0)
	if got := CRLF(res.Stdout); got != "ready\nwinch 50 132\n" {
		t.Errorf("stdout %q, want the new size after SIGWINCH", got)
	}
}

func (s *suite) ttyStdin(t *testing.T) {
	f := NewFixture(t, s.opt)
	spec := f.ttySpec("stty -echo; read a; read b; echo \"got $a $b\"; cat; echo eof")
	spec.Stdin = strings.NewReader("hello\nworld\nlast")
	res := s.run(t, context.Background(), spec)
	wantExit(t, res, 0)
	// The input typed before stty -echo ran may be echoed.
	if got := CRLF(res.Stdout); !strings.HasSuffix(got, "got hello world\nlasteof\n") {
		t.Errorf("stdout %q, want the input read and Stdin's end seen", got)
	}
}

// ttyOneStream: what the command writes to stderr arrives on stdout.
func (s *suite) ttyOneStream(t *testing.T) {
	f := NewFixture(t, s.opt)
	spec := f.ttySpec("echo out; echo err >&2")
	var out, errb Buffer
	spec.Stdout, spec.Stderr = &out, &errb
	res := s.run(t, context.Background(), spec)
	wantExit(t, res, 0)
	if got := CRLF(res.Stdout); got != "out\nerr\n" {
		t.Errorf("stdout %q", got)
	}
	if len(res.Stderr) != 0 || errb.String() != "" {
		t.Errorf("stderr %q / streamed %q, want nothing", res.Stderr, errb.String())
	}
}

// ttyOwnCtty: /dev/tty inside is the command's terminal, whose output
// gatebridge reads (never gatebridge's own terminal).
func (s *suite) ttyOwnCtty(t *testing.T) {
	f := NewFixture(t, s.opt)
	res := s.run(t, context.Background(), f.ttySpec("echo via-dev-tty > /dev/tty"))
	wantExit(t, res, 0)
	if got := CRLF(res.Stdout); got != "via-dev-tty\n" {
		t.Errorf("stdout %q: /dev/tty is not the command's terminal", got)
	}
}

func (s *suite) ttyExit(t *testing.T) {
	f := NewFixture(t, s.opt)
	res := s.run(t, context.Background(), f.ttySpec("exit 42"))
	wantExit(t, res, 42)
}

func (s *suite) ttyTimeout(t *testing.T) {
	f := NewFixture(t, s.opt)
	m := Marker()
	spec := f.ttySpec("sleep " + m + " & echo started; sleep " + m)
	spec.Timeout = shortTimeout
	res := s.run(t, context.Background(), spec)
	wantExit(t, res, sandbox.ExitTimedOut)
	if !res.TimedOut {
		t.Errorf("TimedOut not set")
	}
	if !strings.Contains(string(res.Stdout), "started") {
		t.Errorf("stdout %q: the command never started", res.Stdout)
	}
	s.opt.NoLeftovers(t, m)
}

// ttyOutputCap: a command writing without end to its terminal is capped
// as piped output is (head and tail kept).
func (s *suite) ttyOutputCap(t *testing.T) {
	f := NewFixture(t, s.opt)
	spec := f.ttySpec("i=0; while [ $i -lt 4000 ]; do echo 0123456789012345678901234567890123456789; i=$((i+1)); done; echo END")
	spec.MaxOutput = 4096
	res := s.run(t, context.Background(), spec)
	wantExit(t, res, 0)
	if len(res.Stdout) > 4096+64 || !res.Truncated || res.StdoutDropped == 0 {
		t.Errorf("captured %d bytes, truncated %v, dropped %d; want at most 4096", len(res.Stdout), res.Truncated, res.StdoutDropped)
	}
	if !strings.HasSuffix(CRLF(res.Stdout), "END\n") {
		t.Errorf("the tail is not kept: %q", res.Stdout[max(0, len(res.Stdout)-80):])
	}
}

// RunTTYRefused checks that b, which cannot run a command on a terminal,
// says so (an [*sandbox.Error] naming it) rather than running it without.
func RunTTYRefused(t *testing.T, b sandbox.Backend, f *Fixture) {
	t.Helper()
	err := sandbox.TTYSupport(b)
	var se *sandbox.Error
	if !errors.As(err, &se) || se.Backend != b.Name() {
		t.Fatalf("TTYSupport = %v, want an *sandbox.Error naming %q", err, b.Name())
	}
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	spec := f.ttySpec("echo ran")
	res, err := b.Run(ctx, spec)
	if err == nil {
		t.Fatalf("Run with TTY on %s ran it: %+v", b.Name(), res)
	}
}
