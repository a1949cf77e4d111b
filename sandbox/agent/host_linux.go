//go:build linux

package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/internal/hostilefs"
	"github.com/gatebridge/gatebridge/internal/lossless"
	"github.com/gatebridge/gatebridge/sandbox"
)

// Caps on what the host reads from out/.
const (
	maxHello    = 4 << 10
	maxExitFile = 16
	readChunk   = 256 << 10
)

// Prepare makes DIR's req/ (the host's, read-only to others) with its wake
// FIFO, and out/ for the agent: owned by uid:gid when they are given
// (>= 0, gatebridge is root), else writable by everyone (the agent's user
// is not known yet; req/ still is the host's alone). dir, and an existing
// req/ or out/, must be a directory, not a link: a persistent sandbox's
// agent directory lies in its sessions root, which an earlier sandbox may
// have written, and a link there would have req/ and out/ made, and
// mounted into the sandbox, wherever it points.
func Prepare(dir string, uid, gid int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if fi, err := os.Lstat(dir); err != nil {
		return err
	} else if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory (a symbolic link or file left there?)", dir)
	}
	for _, d := range []string{DirReq, DirOut} {
		p := filepath.Join(dir, d)
		if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", p)
		}
	}
	out := filepath.Join(dir, DirOut)
	if uid >= 0 {
		if err := os.Lchown(out, uid, gid); err != nil {
			return err
		}
		if err := os.Chmod(out, 0o755); err != nil {
			return err
		}
	} else if err := os.Chmod(out, 0o777); err != nil {
		return err
	}
	if err := os.Chmod(filepath.Join(dir, DirReq), 0o755); err != nil {
		return err
	}
	wake := filepath.Join(dir, DirReq, FileWake)
	if fi, err := os.Lstat(wake); err == nil && fi.Mode()&os.ModeNamedPipe == 0 {
		return fmt.Errorf("%s is not a FIFO", wake)
	} else if err != nil {
		if err := unix.Mkfifo(wake, 0o666); err != nil {
			return err
		}
	}
	// The agent opens it read-write; anyone may wake it (a wake only makes
	// it look at req/).
	return os.Chmod(wake, 0o666)
}

// Conn is the host's side of one agent directory. Its methods are safe for
// concurrent use; each [Conn.Run] is one command.
type Conn struct {
	dir       string
	reqFd     int
	outFd     int
	hello     Hello
	uid, gid  int // the agent's, from out/agent.json's owner
	w         *fsnotify.Watcher
	maxStream int64

	mu      sync.Mutex
	waiters map[string]chan struct{}
	closed  bool
	done    chan struct{}
}

// Dial connects to the agent serving dir (prepared by [Prepare]): it
// waits for the agent's hello and watches out/.
func Dial(ctx context.Context, dir string, opts DialOptions) (*Conn, error) {
	if opts.Wait <= 0 {
		opts.Wait = 10 * time.Second
	}
	if opts.MaxStream <= 0 {
		opts.MaxStream = DefaultMaxStream
	}
	reqFd, err := hostilefs.OpenDirNoFollow(filepath.Join(dir, DirReq))
	if err != nil {
		return nil, fmt.Errorf("agent: %s: %w", dir, err)
	}
	outFd, err := hostilefs.OpenDirNoFollow(filepath.Join(dir, DirOut))
	if err != nil {
		unix.Close(reqFd)
		return nil, fmt.Errorf("agent: %s: %w", dir, err)
	}
	c := &Conn{dir: dir, reqFd: reqFd, outFd: outFd, maxStream: opts.MaxStream,
		waiters: map[string]chan struct{}{}, done: make(chan struct{})}
	fail := func(err error) (*Conn, error) {
		c.Close()
		return nil, err
	}
	if c.w, err = fsnotify.NewWatcher(); err != nil {
		return fail(fmt.Errorf("agent: watch: %w", err))
	}
	// Through the fd we opened, never a path the sandbox could swap.
	if err := c.w.Add(fmt.Sprintf("/proc/self/fd/%d", outFd)); err != nil {
		return fail(fmt.Errorf("agent: watch %s: %w", DirOut, err))
	}
	go c.events()
	deadline := time.Now().Add(opts.Wait)
	for {
		err := c.readHello()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("agent: no agent answers in %s after %s: %w", dir, opts.Wait, err))
		}
		select {
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return c, nil
}

// readHello reads and checks out/agent.json, and that it is fresh.
func (c *Conn) readHello() error {
	// Owner and age from the file that was read: a hello the sandbox
	// swapped in after the read does not choose who the sessions go to.
	b, st, err := hostilefs.ReadFileStatAt(c.outFd, FileHello, maxHello)
	if err != nil {
		return err
	}
	var h Hello
	if err := json.Unmarshal(b, &h); err != nil {
		return fmt.Errorf("%s: %w", FileHello, err)
	}
	if h.Protocol != Protocol {
		return fmt.Errorf("%s: protocol %d, want %d (use the same gatebridge binary on both sides)", FileHello, h.Protocol, Protocol)
	}
	if len(h.Path) > 4096 || strings.ContainsAny(h.Path, "\x00\n") {
		h.Path = ""
	}
	if age := time.Since(time.Unix(st.Mtim.Unix())); age > StaleAfter {
		return fmt.Errorf("%s was last touched %s ago: the agent is not running", FileHello, age.Round(time.Second))
	}
	c.mu.Lock()
	c.hello, c.uid, c.gid = h, int(st.Uid), int(st.Gid)
	c.mu.Unlock()
	return nil
}

// User returns the uid and gid the agent (and every command) runs as, as
// the owner of its hello: the sandbox cannot forge another owner unless
// it is root.
func (c *Conn) User() (uid, gid int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.uid, c.gid
}

// Path returns the agent's own PATH (the image's), for commands' PATH.
func (c *Conn) Path() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hello.Path
}

// alive reports whether the agent touched its hello recently.
func (c *Conn) alive() error {
	age, err := c.helloAge()
	if err != nil {
		return fmt.Errorf("the agent's %s is gone: %w", FileHello, err)
	}
	if age > StaleAfter {
		return fmt.Errorf("the agent has not answered for %s", age.Round(time.Second))
	}
	return nil
}

// helloAge stats the hello (not following a link) and says how long ago
// the agent last touched it.
func (c *Conn) helloAge() (time.Duration, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(c.outFd, FileHello, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return 0, err
	}
	return time.Since(time.Unix(st.Mtim.Unix())), nil
}

// events routes out/'s events to the command they name; on an overflow
// or error every command looks.
func (c *Conn) events() {
	for {
		select {
		case ev, ok := <-c.w.Events:
			if !ok {
				return
			}
			name := filepath.Base(ev.Name)
			if i := strings.IndexByte(name, '.'); i > 0 {
				name = name[:i]
			}
			c.mu.Lock()
			ch := c.waiters[name]
			c.mu.Unlock()
			if ch != nil {
				poke(ch)
			}
		case _, ok := <-c.w.Errors:
			if !ok {
				return
			}
			c.mu.Lock()
			for _, ch := range c.waiters {
				poke(ch)
			}
			c.mu.Unlock()
		}
	}
}

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Close stops watching; running commands end with an error, and the
// leases they held end them in the sandbox.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.done)
	c.mu.Unlock()
	if c.w != nil {
		c.w.Close()
	}
	unix.Close(c.reqFd)
	unix.Close(c.outFd)
	return nil
}

// Run runs cmd through the agent with spec's stdin, output streams,
// timeout, kill grace, capture cap and signals, following the
// [sandbox.Backend] contract for Run.
func (c *Conn) Run(ctx context.Context, cmd Command, spec *sandbox.Spec) (*sandbox.Result, error) {
	start := time.Now()
	if len(cmd.Argv) == 0 {
		return nil, &sandbox.Error{Backend: "agent", Op: "run", Err: errors.New("empty command")}
	}
	if err := c.check(spec); err != nil {
		return nil, err
	}
	id := newID()
	wake := make(chan struct{}, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, &sandbox.Error{Backend: "agent", Op: "run", Err: errors.New("connection closed")}
	}
	c.waiters[id] = wake
	c.mu.Unlock()
	r := &run{c: c, id: id, spec: spec}
	defer r.cleanup()

	// The lease: the agent kills the command if this end closes before
	// the command is done (gatebridge died).
	lease, err := c.fifo(id + extLease)
	if err != nil {
		return nil, r.errorf("make lease", err)
	}
	r.closers = append(r.closers, func() { lease.Close() })
	if spec.Stdin != nil {
		in, err := c.fifo(id + extStdin)
		if err != nil {
			return nil, r.errorf("make stdin", err)
		}
		// Closed by the copy when stdin ends, or at cleanup (which makes
		// a blocked write return).
		var once sync.Once
		closeIn := func() { once.Do(func() { in.Close() }) }
		ended := make(chan struct{})
		r.closers = append(r.closers, func() { close(ended); closeIn() })
		go func() {
			_, _ = io.Copy(in, spec.Stdin)
			// A FIFO that no one holds open loses what it holds: keep it
			// until the agent has opened it (it does before it makes
			// the stdout file), then close it for EOF.
			for {
				if unix.Fstatat(c.outFd, id+extStdout, new(unix.Stat_t), unix.AT_SYMLINK_NOFOLLOW) == nil {
					break
				}
				select {
				case <-ended:
				case <-time.After(5 * time.Millisecond):
					continue
				}
				break
			}
			closeIn()
		}()
	}
	c.mu.Lock()
	sh := c.hello.Sh
	c.mu.Unlock()
	if sh {
		// Before the .json: the sh agent starts on seeing the .sh.
		if err := hostilefs.WriteFileAt(c.reqFd, id+extScript, shRequest(cmd), 0o644); err != nil {
			return nil, r.errorf("write request", err)
		}
		r.sent = true
	}
	rq := Request{Argv: cmd.Argv, Env: cmd.Env, Dir: cmd.Dir, Stdin: spec.Stdin != nil, Arg0: spec.Arg0}
	if spec.TTY != nil {
		rq.TTY = &TTYSize{Rows: spec.TTY.Rows, Cols: spec.TTY.Cols}
	}
	req, _ := json.Marshal(rq)
	// Readable by the agent's user: not ours when gatebridge is root.
	if err := hostilefs.WriteFileAt(c.reqFd, id+extRequest, req, 0o644); err != nil {
		return nil, r.errorf("write request", err)
	}
	r.sent = true
	c.wake()

	r.stdout = newStream(c, id+extStdout, spec.Stdout, spec.MaxOutput)
	r.stderr = newStream(c, id+extStderr, spec.Stderr, spec.MaxOutput)
	st := sandbox.NewStopper(ctx, spec, func() { r.signal(syscall.SIGTERM) }, func() { r.signal(syscall.SIGKILL) })
	defer st.Close()
	var hard <-chan time.Time
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	lastLive := time.Now()
	for {
		code, finished, err := r.poll()
		if err != nil {
			return nil, r.errorf("read output", err)
		}
		if finished {
			res := &sandbox.Result{ExitCode: code, Duration: time.Since(start),
				Info: map[string]string{"agent": c.dir}}
			st.Finish(res)
			r.stdout.fill(&res.Stdout, &res.StdoutDropped)
			r.stderr.fill(&res.Stderr, &res.StderrDropped)
			res.Truncated = res.StdoutDropped > 0 || res.StderrDropped > 0
			if r.over != "" {
				res.Stderr = append(res.Stderr, fmt.Sprintf("\ngatebridge: agent: %s\n", r.over)...)
			}
			return res, nil
		}
		if r.over != "" {
			// More output than the host reads: stop the command.
			st.Stop()
		}
		if r.stdout.more || r.stderr.more {
			poke(wake)
		}
		select {
		case <-wake:
		case <-tick.C:
			if time.Since(lastLive) > 2*time.Second {
				lastLive = time.Now()
				if err := c.alive(); err != nil {
					return nil, r.errorf("wait", err)
				}
			}
		case <-c.done:
			return nil, r.errorf("wait", errors.New("connection closed"))
		case <-st.C():
			st.Step()
			if st.Killed() {
				hard = time.After(5 * time.Second)
			}
		case <-hard:
			return nil, r.errorf("wait", errors.New("the command did not end 5s after SIGKILL: the agent is not answering"))
		case sig := <-spec.Signals:
			r.signal(sig)
		case sz := <-spec.Resize:
			r.resize(sz)
		}
	}
}

// TTYSupport is nil when the agent runs commands on a terminal
// ([sandbox.Spec.TTY]): the Go agent does, the sh agent cannot.
func (c *Conn) TTYSupport() error {
	c.mu.Lock()
	ok := c.hello.TTY
	c.mu.Unlock()
	if !ok {
		return &sandbox.Error{Backend: "agent", Op: "run on a terminal", Err: fmt.Errorf("%s: %s cannot open a pseudo-terminal", c.dir, c.agentName()),
			Help: "start the process without tty, or run the sandbox with the Go agent (sandbox.docker.agent: the gatebridge binary, not sh)"}
	}
	return nil
}

// Arg0Support is nil when the agent gives commands an argv[0] of their
// own ([sandbox.Spec.Arg0]): the Go agent does, the sh agent cannot.
func (c *Conn) Arg0Support() error {
	c.mu.Lock()
	ok := c.hello.Arg0
	c.mu.Unlock()
	if !ok {
		return &sandbox.Error{Backend: "agent", Op: "set argv[0]", Err: fmt.Errorf("%s: %s cannot give a command its own argv[0]", c.dir, c.agentName()),
			Help: "start the process without arg0, or run the sandbox with the Go agent (sandbox.docker.agent: the gatebridge binary, not sh)"}
	}
	return nil
}

func (c *Conn) agentName() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hello.Sh {
		return "the sh agent"
	}
	return "this agent (version " + strconv.Quote(c.hello.Version) + ")"
}

// check refuses what spec asks and the agent cannot do, rather than run
// the command without it.
func (c *Conn) check(spec *sandbox.Spec) error {
	if spec.TTY != nil {
		if err := c.TTYSupport(); err != nil {
			return err
		}
	}
	if spec.Arg0 != "" {
		return c.Arg0Support()
	}
	return nil
}

// resize asks the agent to resize the command's terminal.
func (r *run) resize(sz sandbox.TTYSize) {
	r.sizes++
	name := r.id + extSize + strconv.Itoa(r.sizes)
	if hostilefs.WriteFileAt(r.c.reqFd, name, []byte(strconv.Itoa(int(sz.Rows))+" "+strconv.Itoa(int(sz.Cols))), 0o644) == nil {
		r.c.wake()
	}
	// Only the latest size counts: one file per command in req/ however
	// often it is resized (the agent lists req/ up to a cap).
	if r.sizes > 1 {
		unix.Unlinkat(r.c.reqFd, r.id+extSize+strconv.Itoa(r.sizes-1), 0)
	}
}

// fifo makes the FIFO name in req/ and opens it read-write (never
// blocks; the agent opens the read end).
func (c *Conn) fifo(name string) (*os.File, error) {
	if err := hostilefs.MkfifoAt(c.reqFd, name); err != nil {
		return nil, err
	}
	fd, err := unix.Openat(c.reqFd, name, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Unlinkat(c.reqFd, name, 0)
		return nil, err
	}
	// Readable by the agent's user (not ours when gatebridge is root), and
	// writable by no one: a command that could open its own lease for
	// writing would hold it open and outlive a gatebridge that died. The
	// owner could chmod it back, but not on req/'s read-only mount, and
	// in a pod the owner is the sidecar's user.
	if err := unix.Fchmod(fd, 0o444); err != nil {
		unix.Close(fd)
		unix.Unlinkat(c.reqFd, name, 0)
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

func (c *Conn) wake() { _ = hostilefs.WakeAt(c.reqFd, FileWake) }

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// run is one command's host-side state.
type run struct {
	c              *Conn
	id             string
	spec           *sandbox.Spec
	sent           bool
	sigs           int
	sizes          int
	stdout, stderr *stream
	closers        []func()
	over           string // why the output stopped being read
}

func (r *run) errorf(op string, err error) error {
	return &sandbox.Error{Backend: "agent", Op: op, Err: fmt.Errorf("%s: %w", r.c.dir, err),
		Help: "is `gatebridge agent` still running in the sandbox? (`gatebridge agent --help`)"}
}

// signal asks the agent to send sig to the command's process group.
func (r *run) signal(sig syscall.Signal) {
	r.sigs++
	name := r.id + extSignal + strconv.Itoa(r.sigs)
	if hostilefs.WriteFileAt(r.c.reqFd, name, []byte(strconv.Itoa(int(sig))), 0o644) == nil {
		r.c.wake()
	}
}

// poll reads new output and, once the exit file is there, the rest of
// it; finished reports the command is done.
func (r *run) poll() (code int, finished bool, err error) {
	b, err := hostilefs.ReadFileAt(r.c.outFd, r.id+extExit, maxExitFile)
	exited := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, false, err
	}
	if exited {
		var ok bool
		if code, ok = parseExit(b); !ok {
			return 0, false, fmt.Errorf("%s%s: %s is not an exit status", r.id, extExit, lossless.QuoteCap(string(b), 16))
		}
	}
	for _, s := range []*stream{r.stdout, r.stderr} {
		if err := s.read(exited); err != nil {
			if r.over == "" {
				r.over = err.Error()
			}
		}
	}
	return code, exited, nil
}

func (r *run) cleanup() {
	for _, f := range r.closers {
		f()
	}
	for _, s := range []*stream{r.stdout, r.stderr} {
		if s != nil && s.f != nil {
			s.f.Close()
		}
	}
	names := []string{r.id + extRequest, r.id + extScript, r.id + extLease, r.id + extStdin}
	for i := 1; i <= r.sigs; i++ {
		names = append(names, r.id+extSignal+strconv.Itoa(i))
	}
	if r.sizes > 0 {
		names = append(names, r.id+extSize+strconv.Itoa(r.sizes))
	}
	for _, n := range names {
		unix.Unlinkat(r.c.reqFd, n, 0)
	}
	// The agent removes its out/ files once the request is gone; so do we
	// where we may (the same user, or root).
	for _, ext := range []string{extStdout, extStderr, extExit} {
		unix.Unlinkat(r.c.outFd, r.id+ext, 0)
	}
	r.c.mu.Lock()
	delete(r.c.waiters, r.id)
	r.c.mu.Unlock()
	if r.sent {
		r.c.wake()
	}
}

// stream is one output file of a command, read as it grows.
type stream struct {
	c    *Conn
	name string
	live io.Writer
	capt *sandbox.Capture
	f    *os.File
	rw   bool  // opened read-write: what was read is freed
	off  int64 // bytes read
	buf  []byte
	done bool // capped or failed: no more reading
	more bool // stopped early with more to read
}

func newStream(c *Conn, name string, live io.Writer, max int64) *stream {
	return &stream{c: c, name: name, live: live, capt: sandbox.NewCapture(max)}
}

// read reads what is new; final reads up to the size the file has now
// (what the command wrote before its exit was recorded; a process that
// left its group and keeps writing is not waited for).
func (s *stream) read(final bool) error {
	if s.done {
		return nil
	}
	if s.f == nil {
		f, err := hostilefs.OpenFileAt(s.c.outFd, s.name, true)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			s.done = true
			return err
		}
		s.f = f
		fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
		s.rw = err == nil && fl&unix.O_ACCMODE == unix.O_RDWR
	}
	end := int64(-1)
	if final {
		st, err := s.f.Stat()
		if err != nil {
			return err
		}
		end = st.Size()
	}
	if s.buf == nil {
		s.buf = make([]byte, readChunk)
	}
	read := int64(0)
	s.more = false
	for {
		want := int64(len(s.buf))
		if end >= 0 {
			want = min(want, end-s.off)
		}
		if want <= 0 {
			break
		}
		n, err := s.f.ReadAt(s.buf[:want], s.off)
		if n > 0 {
			if s.off+int64(n) > s.c.maxStream {
				n = int(max(0, s.c.maxStream-s.off))
				s.emit(s.buf[:n])
				s.done = true
				return fmt.Errorf("%s exceeded %d bytes: the rest was not read, and the command was stopped", s.name[len(s.name)-6:], s.c.maxStream)
			}
			s.emit(s.buf[:n])
			read += int64(n)
		}
		if err != nil || n == 0 {
			break
		}
		if !final && read >= 4*readChunk {
			s.more = true // let the loop look at timers; the next round goes on
			break
		}
	}
	if s.rw && read > 0 {
		_ = hostilefs.PunchHole(s.f, s.off)
	}
	return nil
}

func (s *stream) emit(p []byte) {
	s.off += int64(len(p))
	s.capt.Write(p)
	if s.live != nil {
		_, _ = s.live.Write(p)
	}
}

func (s *stream) fill(out *[]byte, dropped *int64) {
	*out = s.capt.Bytes()
	*dropped = s.capt.Dropped()
}
