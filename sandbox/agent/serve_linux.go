package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gatebridge/gatebridge/internal/hostilefs"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/internal/proc"
	"golang.org/x/sys/unix"
)

// maxRequest caps a request file; maxReqEntries the entries of req/ read
// at once.
const (
	maxRequest    = 8 << 20
	maxReqEntries = 1 << 16
)

type command struct {
	id      string
	pgid    int
	lastSig int
	done    bool
	// On a terminal (Request.TTY): its master, the last size file
	// applied, and closed when the master's output is all in <id>.stdout.
	master   *os.File
	lastSize int
	copied   chan struct{}
}

type agent struct {
	opts   Options
	reqFd  int
	outFd  int
	mu     sync.Mutex // guards cmds, and starting vs reaping
	cmds   map[string]*command
	reaped map[int]chan unix.WaitStatus // Reap: pid → its waiter
	exited chan string
}

// Serve runs the agent on opts.Dir until ctx ends (then it kills every
// command it started and returns nil) or the directory becomes unusable.
func Serve(ctx context.Context, opts Options) error {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if os.Getpid() == 1 {
		opts.Reap = true
	}
	a := &agent{opts: opts, cmds: map[string]*command{}, reaped: map[int]chan unix.WaitStatus{}, exited: make(chan string, 64)}
	if err := a.open(ctx); err != nil {
		return err
	}
	defer unix.Close(a.reqFd)
	defer unix.Close(a.outFd)
	wake, err := os.OpenFile(filepath.Join(opts.Dir, DirReq, FileWake), os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("agent: open the wake FIFO: %w", err)
	}
	defer wake.Close()
	if fi, err := wake.Stat(); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return fmt.Errorf("agent: %s/%s/%s is not a FIFO", opts.Dir, DirReq, FileWake)
	}
	if err := a.hello(); err != nil {
		return err
	}
	if opts.Reap {
		go a.reap(ctx)
	}
	woken := make(chan struct{}, 1)
	go func() {
		buf := make([]byte, 512)
		for {
			if _, err := wake.Read(buf); err != nil {
				return
			}
			select {
			case woken <- struct{}{}:
			default:
			}
		}
	}()
	beat := time.NewTicker(time.Second)
	defer beat.Stop()
	opts.Logf("gatebridge agent: serving %s (pid %d)", opts.Dir, os.Getpid())
	for {
		a.scan()
		select {
		case <-ctx.Done():
			a.killAll()
			return nil
		case <-woken:
		case id := <-a.exited:
			a.mu.Lock()
			if c := a.cmds[id]; c != nil {
				c.done = true
			}
			a.mu.Unlock()
		case <-beat.C:
			now := time.Now()
			if err := unix.UtimesNanoAt(a.outFd, FileHello, []unix.Timespec{unix.NsecToTimespec(now.UnixNano()), unix.NsecToTimespec(now.UnixNano())}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				if errors.Is(err, unix.ENOENT) {
					_ = a.hello() // removed: say hello again
				}
			}
		}
	}
}

// open waits for the host's req/ and opens req/ and out/.
func (a *agent) open(ctx context.Context) error {
	dir := a.opts.Dir
	deadline := time.Time{}
	if a.opts.WaitHost > 0 {
		deadline = time.Now().Add(a.opts.WaitHost)
	}
	for logged := false; ; {
		if _, err := os.Stat(filepath.Join(dir, DirReq, FileWake)); err == nil {
			break
		}
		if !logged {
			a.opts.Logf("gatebridge agent: waiting for the host to prepare %s", dir)
			logged = true
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			return fmt.Errorf("agent: %s/%s/%s does not exist: is gatebridge serving this directory?", dir, DirReq, FileWake)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	var err error
	if a.reqFd, err = unix.Open(filepath.Join(dir, DirReq), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		return fmt.Errorf("agent: open %s: %w", DirReq, err)
	}
	if a.outFd, err = unix.Open(filepath.Join(dir, DirOut), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		unix.Close(a.reqFd)
		return fmt.Errorf("agent: open %s: %w (the host makes it writable for the sandbox's user)", DirOut, err)
	}
	return nil
}

func (a *agent) hello() error {
	b, _ := json.Marshal(Hello{Protocol: Protocol, PID: os.Getpid(), Version: a.opts.Version, Path: os.Getenv("PATH"), TTY: true, Arg0: true})
	if err := writeAtomic(a.outFd, FileHello, b); err != nil {
		return fmt.Errorf("agent: write %s: %w", FileHello, err)
	}
	return nil
}

// scan starts new requests, delivers new signals, and forgets commands
// the host is done with.
func (a *agent) scan() {
	names, err := hostilefs.ListDir(a.reqFd, maxReqEntries)
	if err != nil {
		a.opts.Logf("gatebridge agent: list %s: %v", DirReq, err)
		return
	}
	present := map[string]bool{}
	type sig struct {
		id string
		n  int
	}
	var sigs, sizes []sig
	for _, name := range names {
		if id, ok := strings.CutSuffix(name, extRequest); ok && validID(id) {
			present[id] = true
			continue
		}
		if id, n, ok := parseSizeName(name); ok {
			sizes = append(sizes, sig{id, n})
			continue
		}
		if id, n, ok := parseSignalName(name); ok {
			sigs = append(sigs, sig{id, n})
		}
	}
	var start []string
	a.mu.Lock()
	for id := range present {
		if a.cmds[id] == nil {
			start = append(start, id)
		}
	}
	for id, c := range a.cmds {
		if !present[id] && c.done {
			delete(a.cmds, id)
			for _, ext := range []string{extStdout, extStderr, extExit} {
				unix.Unlinkat(a.outFd, id+ext, 0)
			}
		}
	}
	a.mu.Unlock()
	sort.Strings(start)
	for _, id := range start {
		a.start(id)
	}
	sort.Slice(sizes, func(i, j int) bool { return sizes[i].n < sizes[j].n })
	for _, s := range sizes {
		a.mu.Lock()
		c := a.cmds[s.id]
		if c == nil || c.done || c.master == nil || s.n <= c.lastSize {
			a.mu.Unlock()
			continue
		}
		c.lastSize = s.n
		master := c.master
		a.mu.Unlock()
		if b, err := hostilefs.ReadFileAt(a.reqFd, s.id+extSize+strconv.Itoa(s.n), 32); err == nil {
			if sz, ok := parseSize(b); ok {
				proc.SetSize(master, sandbox.TTYSize{Rows: sz.Rows, Cols: sz.Cols})
			}
		}
	}
	sort.Slice(sigs, func(i, j int) bool { return sigs[i].n < sigs[j].n })
	for _, s := range sigs {
		a.mu.Lock()
		c := a.cmds[s.id]
		if c == nil || c.done || c.pgid == 0 || s.n <= c.lastSig {
			a.mu.Unlock()
			continue
		}
		c.lastSig = s.n
		pgid := c.pgid
		a.mu.Unlock()
		b, err := hostilefs.ReadFileAt(a.reqFd, s.id+extSignal+strconv.Itoa(s.n), 16)
		if err != nil {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || n < 1 || n > 64 {
			continue
		}
		unix.Kill(-pgid, unix.Signal(n))
	}
}

// start starts the command id; a failure is reported as its exit status
// and a line on its stderr.
func (a *agent) start(id string) {
	c := &command{id: id}
	a.mu.Lock()
	a.cmds[id] = c
	a.mu.Unlock()
	// stdin first: the host keeps its end open until it sees the stdout
	// file, so bytes it wrote before this open are not lost.
	b, rerr := hostilefs.ReadFileAt(a.reqFd, id+extRequest, maxRequest)
	var req Request
	if rerr == nil {
		rerr = json.Unmarshal(b, &req)
	}
	var stdin *os.File
	var inErr error
	defer func() {
		if stdin != nil {
			stdin.Close()
		}
	}()
	if rerr == nil && req.Stdin {
		stdin, inErr = openFIFO(a.reqFd, id+extStdin)
	} else {
		stdin, inErr = os.Open(os.DevNull)
	}
	stdout, err1 := createOut(a.outFd, id+extStdout)
	stderr, err2 := createOut(a.outFd, id+extStderr)
	defer func() {
		if stdout != nil {
			stdout.Close()
		}
		if stderr != nil {
			stderr.Close()
		}
	}()
	fail := func(code int, format string, args ...any) {
		if stderr != nil {
			fmt.Fprintf(stderr, "gatebridge: agent: "+format+"\n", args...)
		}
		a.finish(c, code)
	}
	if err := errors.Join(err1, err2); err != nil {
		fail(1, "create output files: %v", err)
		return
	}
	if rerr != nil || len(req.Argv) == 0 {
		fail(1, "invalid request: %v", rerr)
		return
	}
	if inErr != nil {
		fail(1, "open stdin: %v", inErr)
		return
	}
	pathList, _ := sandbox.EnvValue(req.Env, "PATH")
	path, err := lookPath(req.Argv[0], pathList, req.Dir)
	if err != nil {
		code := 127
		if errors.Is(err, os.ErrPermission) {
			code = 126
		}
		fail(code, "%s: %v", req.Argv[0], err)
		return
	}
	attr := &os.ProcAttr{Dir: req.Dir, Env: req.Env, Files: []*os.File{stdin, stdout, stderr},
		Sys: &syscall.SysProcAttr{Setsid: true}}
	var master, slave *os.File
	if req.TTY != nil {
		// A terminal of the command's own: the controlling terminal of
		// its new session; the agent types stdin at it and copies what
		// it shows to <id>.stdout.
		if req.TTY.Rows == 0 || req.TTY.Cols == 0 {
			fail(1, "invalid request: tty needs rows and cols")
			return
		}
		if master, slave, err = proc.OpenPTY(sandbox.TTYSize{Rows: req.TTY.Rows, Cols: req.TTY.Cols}); err != nil {
			fail(1, "open a pseudo-terminal: %v", err)
			return
		}
		attr.Files = []*os.File{slave, slave, slave}
		attr.Sys = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}
	argv := req.Argv
	if req.Arg0 != "" {
		argv = append([]string{req.Arg0}, req.Argv[1:]...)
	}
	var ch chan unix.WaitStatus
	a.mu.Lock()
	p, err := os.StartProcess(path, argv, attr)
	if slave != nil {
		slave.Close()
	}
	if err == nil && master != nil {
		c.master, c.copied = master, make(chan struct{})
		go func(out *os.File) {
			defer close(c.copied)
			defer out.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := master.Read(buf)
				if n > 0 {
					if _, werr := out.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}(stdout)
		stdout = nil   // the copy closes it
		if req.Stdin { // else the terminal gets no input, not even an end
			go func(in *os.File) {
				defer in.Close()
				proc.TypeInput(master, in)
			}(stdin)
			stdin = nil
		}
	} else if master != nil {
		master.Close()
	}
	if err == nil {
		c.pgid = p.Pid
		if a.opts.Reap {
			ch = make(chan unix.WaitStatus, 1)
			a.reaped[p.Pid] = ch
		}
	}
	a.mu.Unlock()
	if err != nil {
		code := 126
		if errors.Is(err, os.ErrNotExist) {
			code = 127
		}
		fail(code, "start %s: %v", req.Argv[0], err)
		return
	}
	pid := p.Pid
	p.Release() // sets p.Pid to -1: wait4(-1) would take any child's status
	lease, _ := openFIFO(a.reqFd, id+extLease)
	go a.wait(c, pid, ch, lease)
}

// wait waits for the command's exit, kills what it left in its process
// group, and writes the exit status. The lease's EOF (the host went
// away without saying) kills the group early.
func (a *agent) wait(c *command, pid int, reaped chan unix.WaitStatus, lease *os.File) {
	if lease != nil {
		go func() {
			buf := make([]byte, 64)
			for {
				if _, err := lease.Read(buf); err != nil {
					break
				}
			}
			a.mu.Lock()
			done := c.done
			a.mu.Unlock()
			if !done {
				unix.Kill(-pid, unix.SIGKILL)
			}
		}()
	}
	var ws unix.WaitStatus
	if reaped != nil {
		ws = <-reaped
	} else {
		for {
			_, err := unix.Wait4(pid, &ws, 0, nil)
			if err != unix.EINTR {
				break
			}
		}
	}
	// What the command left in its group dies with it, and is gone (not
	// only signalled) before the exit status says the command is over.
	unix.Kill(-pid, unix.SIGKILL)
	for i := 0; i < 200 && unix.Kill(-pid, 0) == nil; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	code := ws.ExitStatus()
	if ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	if c.master != nil {
		// Every output is in <id>.stdout before the exit file says the
		// command is over: the master reads EIO once no process holds
		// the terminal; one that escaped the group is waited for a
		// moment at most.
		c.master.SetReadDeadline(time.Now().Add(250 * time.Millisecond))
		<-c.copied
		a.mu.Lock()
		master := c.master
		a.mu.Unlock()
		master.Close()
	}
	a.finish(c, code)
	if lease != nil {
		lease.Close()
	}
}

func (a *agent) finish(c *command, code int) {
	if err := writeAtomic(a.outFd, c.id+extExit, []byte(strconv.Itoa(code)+"\n")); err != nil {
		a.opts.Logf("gatebridge agent: write %s%s: %v", c.id, extExit, err)
	}
	a.mu.Lock()
	c.done = true
	a.mu.Unlock()
	select {
	case a.exited <- c.id:
	default:
	}
}

// reap reaps every child as it exits, handing a command's status to its
// waiter and dropping the others' (orphans re-parented to PID 1).
func (a *agent) reap(ctx context.Context) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, unix.SIGCHLD)
	defer signal.Stop(ch)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if err == unix.EINTR {
				continue
			}
			if pid <= 0 || err != nil {
				break
			}
			a.mu.Lock()
			w := a.reaped[pid]
			delete(a.reaped, pid)
			a.mu.Unlock()
			if w != nil {
				w <- ws
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-t.C:
		}
	}
}

func (a *agent) killAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.cmds {
		if !c.done && c.pgid > 0 {
			unix.Kill(-c.pgid, unix.SIGKILL)
		}
	}
}

// createOut makes a command's output file, replacing whatever a command
// may have planted under its name.
func createOut(dirfd int, name string) (*os.File, error) {
	unix.Unlinkat(dirfd, name, 0)
	fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// openFIFO opens the host's FIFO name for reading without blocking (the
// host holds its other end), then makes it blocking for the command.
func openFIFO(dirfd int, name string) (*os.File, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		unix.Close(fd)
		return nil, fmt.Errorf("%s is not a FIFO", name)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

func writeAtomic(dirfd int, name string, data []byte) error {
	tmp := "." + name + ".tmp"
	unix.Unlinkat(dirfd, tmp, 0)
	fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	_, werr := unix.Write(fd, data)
	unix.Close(fd)
	if werr != nil {
		unix.Unlinkat(dirfd, tmp, 0)
		return werr
	}
	return unix.Renameat(dirfd, tmp, dirfd, name)
}

// lookPath finds file in path as a shell would: a name with a slash is
// used as is (relative to dir, where the command starts).
func lookPath(file, path, dir string) (string, error) {
	check := func(p string) error {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return os.ErrPermission
		}
		return unix.Access(p, unix.X_OK)
	}
	if strings.Contains(file, "/") {
		at := file
		if !filepath.IsAbs(file) && dir != "" {
			at = filepath.Join(dir, file)
		}
		if err := check(at); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return "", errors.New("no such file or directory")
			}
			return "", fmt.Errorf("%w", os.ErrPermission)
		}
		return file, nil
	}
	denied := false
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue // an empty element would search the cwd
		}
		p := filepath.Join(dir, file)
		err := check(p)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			denied = true
		}
	}
	if denied {
		return "", fmt.Errorf("%w", os.ErrPermission)
	}
	return "", errors.New("command not found")
}
