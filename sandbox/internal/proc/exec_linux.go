//go:build linux

package proc

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/sandbox"
)

// Run runs p under the supervision described in the sandbox package
// contract: live streaming plus capture, timeout and cancellation (the
// [sandbox.Stopper]), reaping of leftovers, exit-code mapping.
func Run(ctx context.Context, spec *sandbox.Spec, p *Process) (*sandbox.Result, error) {
	res := &sandbox.Result{}
	if ctx.Err() != nil {
		// Do not start what would be killed at once.
		return &sandbox.Result{ExitCode: sandbox.ExitCanceled, Canceled: true, Stdout: []byte{}, Stderr: []byte{}}, nil
	}
	outCap, errCap := sandbox.NewCapture(spec.MaxOutput), sandbox.NewCapture(spec.MaxOutput)

	var closers []io.Closer
	closeAll := func() {
		for _, c := range closers {
			c.Close()
		}
		closers = nil
	}
	if spec.TTY != nil {
		return runTTY(ctx, spec, p)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, &sandbox.Error{Backend: p.Backend, Op: "create stdout pipe", Err: err}
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, &sandbox.Error{Backend: p.Backend, Op: "create stderr pipe", Err: err}
	}
	closers = append(closers, outW, errW)

	cmd := &exec.Cmd{
		Path:       p.Path,
		Args:       p.Args,
		Env:        p.Env,
		Dir:        p.Dir,
		Stdout:     outW,
		Stderr:     errW,
		ExtraFiles: p.Extra,
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:    true,
			Pdeathsig:  cmp.Or(p.DeathSignal, syscall.SIGKILL), // set after the credential change
			Credential: p.Cred,
		},
	}
	// stdin: nil reads as /dev/null, an *os.File is handed over as is, any
	// other reader is copied through a pipe Run owns. Run does not wait for
	// a Read from spec.Stdin that blocks: once the command is gone it
	// closes the pipe, and the copy ends when that Read returns.
	// A terminal is copied too: the command runs in its own process group,
	// which is not the terminal's foreground group, so reading the terminal
	// itself would stop it with SIGTTIN until the timeout.
	var stdinW *os.File
	stdin := spec.Stdin
	if f, ok := stdin.(*os.File); ok && isTerminal(f) {
		stdin = struct{ io.Reader }{f}
	}
	switch in := stdin.(type) {
	case nil:
		devNull, err := os.Open(os.DevNull)
		if err != nil {
			closeAll()
			outR.Close()
			errR.Close()
			return nil, &sandbox.Error{Backend: p.Backend, Op: "open " + os.DevNull, Err: err}
		}
		closers = append(closers, devNull)
		cmd.Stdin = devNull
	case *os.File:
		cmd.Stdin = in
	default:
		r, w, err := os.Pipe()
		if err != nil {
			closeAll()
			outR.Close()
			errR.Close()
			return nil, &sandbox.Error{Backend: p.Backend, Op: "create stdin pipe", Err: err}
		}
		closers = append(closers, r)
		cmd.Stdin, stdinW = r, w
	}

	start := time.Now()
	waited, err := startLocked(cmd, p)
	if err != nil {
		closeAll()
		outR.Close()
		errR.Close()
		if stdinW != nil {
			stdinW.Close()
		}
		return nil, &sandbox.Error{Backend: p.Backend, Op: "start " + p.Path, Err: err}
	}
	if p.Reap {
		defer reapGroup(cmd.Process.Pid)() // after the group is gone
	}
	closeAll() // the child has its copies
	if stdinW != nil {
		go func() {
			io.Copy(stdinW, stdin) // EPIPE when the command stops reading
			stdinW.Close()
		}()
		defer stdinW.Close() // unblocks a pending Write; a second Close is harmless
	}

	var copiers sync.WaitGroup
	copiers.Add(2)
	var draining atomic.Bool
	go copyOut(&copiers, outR, outCap, spec.Stdout, &draining)
	go copyOut(&copiers, errR, errCap, spec.Stderr, &draining)

	st := supervise(ctx, spec, p.Tree(cmd.Process), waited, nil)
	defer st.Close()
	res.Duration = time.Since(start)

	// Whatever still holds the pipes is out of reach: read what it wrote
	// until the pipes stay empty for drainDelay, then stop. The delay counts
	// from each read, not from now: output still in the pipes while a slow
	// live writer holds the copier up is not lost.
	draining.Store(true)
	deadline := time.Now().Add(drainDelay)
	outR.SetReadDeadline(deadline)
	errR.SetReadDeadline(deadline)
	copiers.Wait()
	outR.Close()
	errR.Close()

	res.ExitCode = exitCode(cmd.ProcessState)
	st.Finish(res)
	res.Stdout, res.StdoutDropped = outCap.Bytes(), outCap.Dropped()
	res.Stderr, res.StderrDropped = errCap.Bytes(), errCap.Dropped()
	res.Truncated = res.StdoutDropped > 0 || res.StderrDropped > 0
	return res, nil
}

// startLocked starts cmd and returns a channel closed once it has been
// reaped (its outcome is then in cmd.ProcessState). Pdeathsig belongs to
// the thread that forks: the goroutine that starts cmd stays on its
// thread until the process is reaped, so that the thread outlives the
// child and the child dies only with gatebridge.
func startLocked(cmd *exec.Cmd, p *Process) (<-chan struct{}, error) {
	started := make(chan error, 1)
	waited := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		if p.Prepare != nil {
			// Prepare may change this thread's credentials (its session
			// keyring): never hand the thread back to the scheduler.
			if err := p.Prepare(); err != nil {
				started <- err
				return
			}
		} else {
			defer runtime.UnlockOSThread()
		}
		err := cmd.Start()
		if p.Started != nil {
			p.Started()
		}
		if err != nil {
			started <- err
			return
		}
		started <- nil
		cmd.Wait() // the outcome is in cmd.ProcessState
		close(waited)
	}()
	return waited, <-started
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// supervise runs the stop sequence (timeout, cancellation, grace) over
// tree until the main process is reaped (waited), passing spec's signals
// on (during the grace too) and, with resize, each size of spec.Resize;
// then it ends what the process left behind: TERM, KILL after the grace.
// The caller closes the returned Stopper after reading its outcome.
func supervise(ctx context.Context, spec *sandbox.Spec, tree Tree, waited <-chan struct{}, resize func(sandbox.TTYSize)) *sandbox.Stopper {
	st := sandbox.NewStopper(ctx, spec, tree.Terminate, tree.Kill)
	var sizes <-chan sandbox.TTYSize // nil: never ready
	if resize != nil {
		sizes = spec.Resize
	}
	for running := true; running; {
		select {
		case <-waited:
			running = false
		case <-st.C():
			st.Step()
		case sig := <-spec.Signals:
			tree.Signal(sig)
		case sz := <-sizes:
			resize(sz)
		}
	}
	if tree.Alive() {
		tree.Terminate()
		if !waitGone(tree, st.Grace()) {
			tree.Kill()
			waitGone(tree, reapLimit)
		}
	}
	return st
}

// waitGone polls until tree has no live process or limit passes.
func waitGone(tree Tree, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for d := time.Millisecond; ; d = min(2*d, 50*time.Millisecond) {
		if !tree.Alive() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(d)
	}
}

// copyOut copies r into the capture and, while it accepts writes, into
// live. Once draining is set, each read gives up after drainDelay without
// data.
func copyOut(wg *sync.WaitGroup, r *os.File, c *sandbox.Capture, live io.Writer, draining *atomic.Bool) {
	defer wg.Done()
	buf := make([]byte, 32<<10)
	for {
		if draining.Load() {
			r.SetReadDeadline(time.Now().Add(drainDelay))
		}
		n, err := r.Read(buf)
		if n > 0 {
			c.Write(buf[:n])
			if live != nil {
				if _, werr := live.Write(buf[:n]); werr != nil {
					live = nil // keep capturing; never block the command
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// exitCode maps a process state to a shell-style exit code.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// groupTree is the process group of a command started with Setpgid.
type groupTree struct{ pgid int }

// NewGroupTree is the Tree of a command whose processes stay in the
// process group its main process p leads (every process started with
// Setpgid does).
func NewGroupTree(p *os.Process) Tree { return groupTree{pgid: p.Pid} }

func (g groupTree) Terminate() { syscall.Kill(-g.pgid, syscall.SIGTERM) }
func (g groupTree) Kill()      { syscall.Kill(-g.pgid, syscall.SIGKILL) }
func (g groupTree) Signal(sig syscall.Signal) {
	syscall.Kill(-g.pgid, sig)
}

func (g groupTree) Alive() bool {
	if err := syscall.Kill(-g.pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	// Something is in the group; zombies waiting for a reaper that is not
	// us do not count.
	found := false
	Scan(func(pid int, stat Stat) bool {
		if stat.Pgrp == g.pgid && stat.State != 'Z' && stat.State != 'X' {
			found = true
			return false
		}
		return true
	})
	return found
}

// Stat holds the fields of /proc/<pid>/stat a Tree needs.
type Stat struct {
	State byte // R, S, D, Z (zombie), X (dead), …
	Ppid  int
	Pgrp  int
}

// readStat parses /proc/<pid>/stat.
func readStat(pid int) (Stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, false
	}
	// pid (comm) state ppid pgrp …; comm may contain spaces and parens.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return Stat{}, false
	}
	f := bytes.Fields(b[i+2:])
	if len(f) < 3 || len(f[0]) != 1 {
		return Stat{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgrp, err2 := strconv.Atoi(string(f[2]))
	if err1 != nil || err2 != nil {
		return Stat{}, false
	}
	return Stat{State: f[0][0], Ppid: ppid, Pgrp: pgrp}, true
}

// Scan calls fn for every process in /proc until fn returns false.
func Scan(fn func(pid int, stat Stat) bool) {
	d, err := os.Open("/proc")
	if err != nil {
		return
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		st, ok := readStat(pid)
		if !ok {
			continue
		}
		if !fn(pid, st) {
			return
		}
	}
}
