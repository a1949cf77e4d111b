package approval

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/gatebridge/gatebridge/bridge/cmdpolicy"
	"github.com/gatebridge/gatebridge/internal/lossless"
)

// Marker starts every line of the terminal prompt. Each prompt begins by
// resetting the terminal's text attributes and character set and
// clearing the line (so what the sandbox printed cannot hide or recolour
// it), and the sandbox's output is held back while a prompt is up
// ([Terminal.Output]), so no line of the sandbox's can appear between
// the marker lines or after the question.
const Marker = "gatebridge ▸ "

// reset is written before a prompt: attributes off (SGR 0), the ASCII
// character set (ESC ( B), back to column 0, line cleared.
const reset = "\x1b[0m\x1b(B\r\x1b[2K"

// maxTries bounds the unreadable answers to one question (then: deny).
const maxTries = 5

// Terminal is an [Approver] that asks a person on a terminal: the
// controlling terminal (/dev/tty, [OpenTerminal]), never the sandbox's
// stdin or stdout. It reads the terminal in one goroutine of its own;
// what the person types while no question is up goes to [Terminal.Stdin]
// (the sandbox's stdin, when that is the terminal), what they type while
// one is up goes to the question only, so the two never race for an
// answer. One question is shown at a time; the others wait, each within
// its own context.
type Terminal struct {
	in  *os.File  // the terminal, read
	out io.Writer // the terminal, written
	// Note, when set, is shown under every question (the local backend:
	// approvals there guide, not guard).
	Note string

	sem  chan struct{} // one question at a time
	hold pauser        // Output's writes, held while a question is up

	mu      sync.Mutex
	cond    *sync.Cond
	asking  chan []byte // set while a question reads
	queue   []byte      // typed outside a question, for Stdin
	inEOF   bool        // Ctrl-D outside a question: Stdin's EOF
	dead    error       // the terminal can no longer be read
	started bool
	closed  bool
}

var _ Approver = (*Terminal)(nil)

// ErrNoTerminal is OpenTerminal's error when there is no controlling
// terminal.
var ErrNoTerminal = errors.New("approval: no terminal to ask on")

// OpenTerminal opens the controlling terminal (/dev/tty) to ask on.
func OpenTerminal() (*Terminal, error) {
	f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("%w (/dev/tty: %v)", ErrNoTerminal, err)
	}
	return NewTerminal(f, f), nil
}

// NewTerminal asks on in and out (tests: a pty's slave).
func NewTerminal(in *os.File, out io.Writer) *Terminal {
	t := &Terminal{in: in, out: out, sem: make(chan struct{}, 1)}
	t.cond = sync.NewCond(&t.mu)
	t.hold.cond = sync.NewCond(&t.hold.mu)
	return t
}

// Close stops reading the terminal and closes it.
func (t *Terminal) Close() error {
	t.mu.Lock()
	t.closed = true
	t.cond.Broadcast()
	t.mu.Unlock()
	t.in.SetReadDeadline(time.Now()) // the reader returns (where the file can poll)
	return t.in.Close()
}

// maxQueue bounds what is typed ahead for the sandbox's stdin.
const maxQueue = 1 << 20

// start runs the reader once.
func (t *Terminal) start() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.started {
		return
	}
	t.started = true
	go t.read()
}

// read is the one reader of the terminal: each read (a line, the
// terminal being in canonical mode) goes to the question up, or else to
// the queue for Stdin.
func (t *Terminal) read() {
	buf := make([]byte, 4096)
	for {
		n, err := t.in.Read(buf)
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			return
		}
		chunk := append([]byte(nil), buf[:n]...)
		eof := n == 0 && errors.Is(err, io.EOF)
		switch {
		case t.asking != nil && (n > 0 || eof):
			t.asking <- chunk // buffered: one chunk per question; empty = EOF
			t.asking = nil
		case n > 0:
			for len(t.queue) >= maxQueue && !t.closed && t.asking == nil {
				t.cond.Wait()
			}
			t.queue = append(t.queue, chunk...)
		case eof:
			t.inEOF = true
		}
		if err != nil && !eof {
			t.dead = err
			if t.asking != nil {
				close(t.asking)
				t.asking = nil
			}
			t.cond.Broadcast()
			t.mu.Unlock()
			return
		}
		t.cond.Broadcast()
		t.mu.Unlock()
	}
}

// Stdin is the terminal's input for the sandbox when its stdin is the
// terminal: what the person types while no question is up. Ctrl-D ends
// it.
func (t *Terminal) Stdin() io.Reader {
	t.start()
	return stdinReader{t}
}

type stdinReader struct{ t *Terminal }

func (r stdinReader) Read(p []byte) (int, error) {
	t := r.t
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.queue) == 0 && !t.inEOF && t.dead == nil && !t.closed {
		t.cond.Wait()
	}
	if len(t.queue) == 0 {
		t.inEOF = false
		return 0, io.EOF
	}
	n := copy(p, t.queue)
	t.queue = t.queue[n:]
	t.cond.Broadcast()
	return n, nil
}

// Output wraps w (the sandbox's stdout or stderr on this terminal) so
// that its writes wait while a question is up.
func (t *Terminal) Output(w io.Writer) io.Writer { return heldWriter{t, w} }

type heldWriter struct {
	t *Terminal
	w io.Writer
}

func (h heldWriter) Write(p []byte) (int, error) {
	h.t.hold.enter()
	defer h.t.hold.leave()
	return h.w.Write(p)
}

// pauser holds writers back while paused, and lets the one who pauses
// wait (within a context) for the writes in flight.
type pauser struct {
	mu       sync.Mutex
	cond     *sync.Cond
	paused   bool
	inflight int
	drained  chan struct{} // closed when inflight reaches 0 while paused
}

func (p *pauser) enter() {
	p.mu.Lock()
	for p.paused {
		p.cond.Wait()
	}
	p.inflight++
	p.mu.Unlock()
}

func (p *pauser) leave() {
	p.mu.Lock()
	if p.inflight--; p.inflight == 0 && p.drained != nil {
		close(p.drained)
		p.drained = nil
	}
	p.mu.Unlock()
}

// pause stops new writes and waits for those in flight (a terminal
// that does not take output, a reader that stopped reading a pipe: ctx
// bounds the wait).
func (p *pauser) pause(ctx context.Context) error {
	p.mu.Lock()
	p.paused = true
	var wait chan struct{}
	if p.inflight > 0 {
		p.drained = make(chan struct{})
		wait = p.drained
	}
	p.mu.Unlock()
	if wait == nil {
		return nil
	}
	select {
	case <-wait:
		return nil
	case <-ctx.Done():
		p.resume()
		return context.Cause(ctx)
	}
}

func (p *pauser) resume() {
	p.mu.Lock()
	p.paused, p.drained = false, nil
	p.cond.Broadcast()
	p.mu.Unlock()
}

// choice is one answer the prompt offers.
type choice struct {
	key   string
	text  string
	grant *Grant // nil: this call only (or deny)
	allow bool
}

// choices are the prompt's answers for req: y and n always.
func choices(req *Request) []choice {
	cs := []choice{{key: "y", text: "allow this call once", allow: true}, {key: "n", text: "deny it"}}
	if req.Command != nil {
		cs[0].text = "allow this command once"
		return cs
	}
	for i := range req.Offers {
		g := &req.Offers[i]
		key := ""
		switch {
		case g.Lifetime == LifeSession:
			key = "s"
		case g.Lifetime == LifeWorkspace && g.Exact != nil:
			key = "w"
		case g.Lifetime == LifeAlways && g.Exact != nil:
			key = "a"
		case g.Patterns != nil:
			key = "p"
		default:
			continue
		}
		cs = append(cs, choice{key: key, text: g.Describe(), grant: g, allow: true})
	}
	return cs
}

// Prompt is the question as the person sees it (without the reset
// before it).
func Prompt(req *Request, note string) string {
	var b strings.Builder
	line := func(format string, a ...any) { b.WriteString(Marker + fmt.Sprintf(format, a...) + "\n") }
	if req.Command != nil {
		// A command the command policy asks about: allow it or not.
		line("approval needed: command %s", cmdpolicy.ShowCommand(req.Command))
		line("  %s", req.Rule)
		for _, c := range choices(req) {
			line("  %s  %s", c.key, c.text)
		}
		if note != "" {
			line("note: %s", note)
		}
		b.WriteString(Marker + "run this command? [y/n]: ")
		return b.String()
	}
	n := len(req.Args)
	line("approval needed: gate %s, %d argument%s", lossless.Quote(req.Gate), n, plural(n))
	for i, a := range req.Args {
		if i == maxShownArgs {
			line("  … and %d more arguments", n-i)
			break
		}
		line("  %d: %s", i+1, showArg(a))
	}
	if req.Rule != "" {
		line("  asked by %s", req.Rule)
	}
	var keys []string
	for _, c := range choices(req) {
		line("  %s  %s", c.key, c.text)
		keys = append(keys, c.key)
	}
	if note != "" {
		line("note: %s", note)
	}
	b.WriteString(fmt.Sprintf("%sallow %s? [%s]: ", Marker, lossless.Quote(req.Gate), strings.Join(keys, "/")))
	return b.String()
}

// maxShownArgs bounds the arguments a prompt lists.
const maxShownArgs = 32

// Ask implements [Approver].
func (t *Terminal) Ask(ctx context.Context, req *Request) (Answer, error) {
	t.start()
	select {
	case t.sem <- struct{}{}:
	case <-ctx.Done():
		return Answer{}, context.Cause(ctx)
	}
	defer func() { <-t.sem }()
	if err := t.hold.pause(ctx); err != nil {
		return Answer{}, err
	}
	defer t.hold.resume()
	cs := choices(req)
	question := reset + Prompt(req, t.Note)
	for try := 0; ; try++ {
		line, err := t.readLine(ctx, question)
		if err != nil {
			if ctx.Err() != nil {
				io.WriteString(t.out, "\n"+reset+Marker+"question withdrawn ("+context.Cause(ctx).Error()+")\n")
				return Answer{}, context.Cause(ctx)
			}
			io.WriteString(t.out, "\n"+Marker+"no answer (the terminal closed): denied\n")
			return Answer{Allow: false, Reason: "denied: the terminal closed before an answer"}, nil
		}
		key := strings.ToLower(strings.TrimSpace(line))
		for _, c := range cs {
			if key == c.key {
				if !c.allow {
					io.WriteString(t.out, Marker+"denied\n")
					return Answer{Allow: false, By: ByPerson, Reason: "denied by the person at the terminal"}, nil
				}
				io.WriteString(t.out, Marker+"allowed: "+c.text+"\n")
				return Answer{Allow: true, By: ByPerson, Grant: c.grant}, nil
			}
		}
		if try+1 >= maxTries {
			io.WriteString(t.out, Marker+"no valid answer: denied\n")
			return Answer{Allow: false, By: ByPerson, Reason: "denied: no valid answer at the terminal"}, nil
		}
		var keys []string
		for _, c := range cs {
			keys = append(keys, c.key)
		}
		question = fmt.Sprintf("%sanswer %s and Enter: ", Marker, strings.Join(keys, ", "))
	}
}

// readLine shows question and returns the next line typed, or an error
// when ctx ends or the terminal can no longer be read (or reads EOF:
// Ctrl-D). What is typed from the moment the question is shown is the
// answer.
func (t *Terminal) readLine(ctx context.Context, question string) (string, error) {
	ch := make(chan []byte, 1)
	t.mu.Lock()
	if t.dead != nil || t.closed {
		t.mu.Unlock()
		return "", io.EOF
	}
	// What was typed ahead belongs to the sandbox; the answer is what
	// comes now.
	t.asking = ch
	t.cond.Broadcast()
	t.mu.Unlock()
	io.WriteString(t.out, question)
	select {
	case chunk, ok := <-ch:
		if !ok || len(chunk) == 0 {
			return "", io.EOF
		}
		line, _, _ := bytes.Cut(chunk, []byte("\n"))
		return string(line), nil
	case <-ctx.Done():
		t.mu.Lock()
		if t.asking == ch {
			t.asking = nil
		}
		t.mu.Unlock()
		return "", context.Cause(ctx)
	}
}
