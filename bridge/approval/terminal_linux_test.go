package approval

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/internal/tty"
)

// syncBuf is what a person's terminal has shown.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// person is the other side of a pty: what it shows, and the keys typed.
type person struct {
	t      *testing.T
	master *os.File
	screen *syncBuf
	term   *Terminal
}

func newPerson(t *testing.T) *person {
	master, slave, err := tty.OpenPTY()
	if err != nil {
		t.Skipf("no pty here: %v", err)
	}
	p := &person{t: t, master: master, screen: &syncBuf{}, term: NewTerminal(slave, slave)}
	go io.Copy(p.screen, master)
	t.Cleanup(func() { p.term.Close(); master.Close() })
	return p
}

// waitFor waits until the screen shows s (and fails after a long while:
// a prompt that never comes).
func (p *person) waitFor(s string) string { p.t.Helper(); return p.waitForN(s, 1) }

// waitForN waits until the screen shows s n times.
func (p *person) waitForN(s string, n int) string {
	p.t.Helper()
	for i := 0; i < 2000; i++ {
		if got := p.screen.String(); strings.Count(got, s) >= n {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.t.Fatalf("the terminal never showed %q; it shows %q", s, p.screen.String())
	return ""
}

func (p *person) typeLine(s string) { p.master.Write([]byte(s + "\n")) }

func (p *person) ask(req *Request) chan Answer {
	ch := make(chan Answer, 1)
	go func() {
		a, err := p.term.Ask(context.Background(), req)
		if err != nil {
			p.t.Errorf("Ask: %v", err)
		}
		ch <- a
	}()
	return ch
}

func offersFor(t *testing.T, args ...string) *Request {
	d := New(Config{Store: newStore(t)})
	c := Call{Gate: "git_log", Args: args, Session: "s1", Workspace: "/src/app"}
	return &Request{Gate: c.Gate, Args: c.Args, Session: c.Session, Workspace: c.Workspace, Offers: d.offers(gitLog(t), c, time.Now())}
}

func TestTerminalYesNo(t *testing.T) {
	p := newPerson(t)
	req := offersFor(t, "-n", "5")
	ch := p.ask(req)
	screen := p.waitFor(`allow "git_log"? [y/n/s/w/a/p]: `)
	for _, want := range []string{Marker + `approval needed: gate "git_log", 2 arguments`, `  1: "-n"`, `  2: "5"`,
		"  y  allow this call once", "  n  deny it", "  s  allows \"git_log\" with any arguments its policy allows, for this session",
		`  p  allows "git_log" with 2 arguments matching "-n" "(?:[0-9]+)"`} {
		if !strings.Contains(screen, want) {
			t.Errorf("prompt lacks %q:\n%s", want, screen)
		}
	}
	if !strings.HasPrefix(screen, reset) {
		t.Errorf("the prompt does not start by resetting the line: %q", screen[:min(len(screen), 20)])
	}
	p.typeLine("y")
	if a := <-ch; !a.Allow || a.Grant != nil {
		t.Errorf("y: %+v", a)
	}
	ch = p.ask(req)
	p.waitForN(`allow "git_log"? [y/n/s/w/a/p]: `, 2)
	p.typeLine("maybe")
	p.waitFor("answer y, n, s, w, a, p and Enter")
	p.typeLine("n")
	if a := <-ch; a.Allow {
		t.Errorf("n: %+v", a)
	}
	ch = p.ask(req)
	p.waitForN(`allow "git_log"? [y/n/s/w/a/p]: `, 3)
	p.typeLine("p")
	if a := <-ch; !a.Allow || a.Grant == nil || a.Grant.Patterns == nil {
		t.Errorf("p: %+v", a)
	}
}

// Attack: arguments built to look like another gate or another choice
// (newlines, ANSI escapes, \r, \xff, very long values) are shown escaped,
// on their own line each, long ones cut with their length.
func TestTerminalEscapesArguments(t *testing.T) {
	p := newPerson(t)
	hostile := []string{
		"HEAD\n" + Marker + `approval needed: gate "read_file", 0 arguments`,
		"\x1b[2K\r" + Marker + "  y  allow this call once",
		"\xff\xfe",
		strings.Repeat("B", 10000),
	}
	ch := p.ask(&Request{Gate: "git_log", Args: hostile})
	screen := p.waitFor(`allow "git_log"? [y/n]: `)
	body := strings.ReplaceAll(strings.TrimPrefix(screen, reset), "\r\n", "\n") // the pty's own line ends
	if strings.Count(body, "\x1b") != 0 || strings.Contains(body, "\r") || strings.Contains(body, "\xff") {
		t.Errorf("a raw escape, \\r or \\xff reached the terminal: %q", body)
	}
	if n := strings.Count("\n"+body, "\n"+Marker+"approval needed"); n != 1 {
		t.Errorf("%d approval headers on the screen, want 1:\n%s", n, body)
	}
	for _, want := range []string{`  1: "HEAD\n` + Marker, `  2: "\x1b[2K\r`, `  3: "\xff\xfe"`, `(10000 bytes)`} {
		if !strings.Contains(body, want) {
			t.Errorf("prompt lacks %q", want)
		}
	}
	if len(body) > 4000 {
		t.Errorf("the prompt is %d bytes: the long value was not cut", len(body))
	}
	p.typeLine("n")
	<-ch
}

func TestTerminalWithdraw(t *testing.T) {
	p := newPerson(t)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := p.term.Ask(ctx, &Request{Gate: "git_log"})
		errc <- err
	}()
	p.waitFor(`allow "git_log"?`)
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a cancelled question was answered")
	}
	p.waitFor("question withdrawn")
	// the next question still gets its answer
	ch := p.ask(&Request{Gate: "other"})
	p.waitFor(`allow "other"?`)
	p.typeLine("y")
	if a := <-ch; !a.Allow {
		t.Errorf("after a withdrawal: %+v", a)
	}
}

// What the person types outside a question goes to the sandbox's stdin;
// the answer to a question never does.
func TestTerminalRoutesStdin(t *testing.T) {
	p := newPerson(t)
	in := p.term.Stdin()
	p.typeLine("for the sandbox")
	buf := make([]byte, 100)
	n, err := in.Read(buf)
	if err != nil || string(buf[:n]) != "for the sandbox\n" {
		t.Fatalf("stdin read %q, %v", buf[:n], err)
	}
	ch := p.ask(&Request{Gate: "git_log"})
	p.waitFor(`allow "git_log"?`)
	p.typeLine("y")
	<-ch
	p.typeLine("after")
	n, _ = in.Read(buf)
	if got := string(buf[:n]); got != "after\n" {
		t.Errorf("stdin got %q after the question, want only %q", got, "after\n")
	}
}

// The sandbox's output is held while a question is up; a write that
// cannot finish (a terminal or pipe that takes no output) does not keep
// the question from being withdrawn.
func TestTerminalHoldsOutput(t *testing.T) {
	p := newPerson(t)
	blocked := &blockingWriter{entered: make(chan struct{}), release: make(chan struct{})}
	w := p.term.Output(blocked)
	go w.Write([]byte("stuck"))
	<-blocked.entered // a write in flight, never finishing on its own
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := p.term.Ask(ctx, &Request{Gate: "git_log"})
		errc <- err
	}()
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a question behind a stuck write was answered")
	}
	close(blocked.release)
	// once the write is done, a question holds the next ones until answered
	var after syncBuf
	held := p.term.Output(&after)
	ch := p.ask(&Request{Gate: "git_log"})
	p.waitFor(`allow "git_log"?`)
	wrote := make(chan struct{})
	go func() { held.Write([]byte("late")); close(wrote) }()
	p.typeLine("y")
	<-ch
	<-wrote
	if after.String() != "late" {
		t.Errorf("held write: %q", after.String())
	}
}

type blockingWriter struct {
	entered, release chan struct{}
	once             sync.Once
}

func (b *blockingWriter) Write(p []byte) (int, error) {
	b.once.Do(func() { close(b.entered) })
	<-b.release
	return len(p), nil
}
