//go:build linux

package proc

import (
	"cmp"
	"context"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/internal/tty"
	"github.com/gatebridge/gatebridge/sandbox"
)

// OpenPTY opens a new pseudo-terminal of size sz: the master, which only
// gatebridge reads and writes, and the slave, the command's stdin, stdout,
// stderr and controlling terminal. Neither becomes gatebridge's own
// controlling terminal (O_NOCTTY).
func OpenPTY(sz sandbox.TTYSize) (master, slave *os.File, err error) {
	if master, slave, err = tty.OpenPTY(); err != nil {
		return nil, nil, err
	}
	if err := SetSize(master, sz); err != nil {
		slave.Close()
		master.Close()
		return nil, nil, err
	}
	return master, slave, nil
}

// SetSize sets the terminal's size; the kernel sends SIGWINCH to its
// foreground process group.
func SetSize(master *os.File, sz sandbox.TTYSize) error {
	return control(master, func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: sz.Rows, Col: sz.Cols})
	})
}

// control runs fn on f's descriptor without f.Fd(), which would put the
// master in blocking mode: its reads would then ignore the drain's
// deadline, and a process that escaped holding the terminal would hold
// Run forever.
func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// ttyEOF is the terminal's end-of-file character (VEOF, Ctrl-D unless the
// command changed it).
func ttyEOF(master *os.File) byte {
	eof := byte(4)
	control(master, func(fd int) error {
		t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		if err == nil && t.Cc[unix.VEOF] != 0 {
			eof = t.Cc[unix.VEOF]
		}
		return err
	})
	return eof
}

// runTTY is Run for a command on a pseudo-terminal (Spec.TTY): the
// command starts a session of its own (setsid) whose controlling terminal
// is the slave (TIOCSCTTY), so that /dev/tty inside is that terminal and
// never gatebridge's. The master is read into Stdout through the same
// capture and drain as a pipe, and closed when Run returns.
func runTTY(ctx context.Context, spec *sandbox.Spec, p *Process) (*sandbox.Result, error) {
	res := &sandbox.Result{}
	outCap := sandbox.NewCapture(spec.MaxOutput)
	master, slave, err := OpenPTY(*spec.TTY)
	if err != nil {
		return nil, &sandbox.Error{Backend: p.Backend, Op: "open a pseudo-terminal", Err: err,
			Help: "check that /dev/ptmx and /dev/pts are usable here, or start the process without tty"}
	}
	defer master.Close()
	cmd := &exec.Cmd{
		Path:       p.Path,
		Args:       p.Args,
		Env:        p.Env,
		Dir:        p.Dir,
		Stdin:      slave,
		Stdout:     slave,
		Stderr:     slave,
		ExtraFiles: p.Extra,
		SysProcAttr: &syscall.SysProcAttr{
			// A new session (so also a new process group, which the
			// group Tree signals) with the slave, the child's fd 0, as
			// its controlling terminal.
			Setsid:     true,
			Setctty:    true,
			Ctty:       0,
			Pdeathsig:  cmp.Or(p.DeathSignal, syscall.SIGKILL),
			Credential: p.Cred,
		},
	}
	start := time.Now()
	waited, err := startLocked(cmd, p)
	slave.Close() // the child has its copy: the master reads EIO once every holder is gone
	if err != nil {
		return nil, &sandbox.Error{Backend: p.Backend, Op: "start " + p.Path, Err: err}
	}
	if p.Reap {
		defer reapGroup(cmd.Process.Pid)()
	}
	if spec.Stdin != nil {
		go TypeInput(master, spec.Stdin)
	}

	var copiers sync.WaitGroup
	copiers.Add(1)
	var draining atomic.Bool
	go copyOut(&copiers, master, outCap, spec.Stdout, &draining)

	st := supervise(ctx, spec, p.Tree(cmd.Process), waited, func(sz sandbox.TTYSize) {
		SetSize(master, sz) // a failure leaves the old size
	})
	defer st.Close()
	res.Duration = time.Since(start)
	draining.Store(true)
	master.SetReadDeadline(time.Now().Add(drainDelay))
	copiers.Wait()

	res.ExitCode = exitCode(cmd.ProcessState)
	st.Finish(res)
	res.Stdout, res.StdoutDropped = outCap.Bytes(), outCap.Dropped()
	res.Stderr = []byte{}
	res.Truncated = res.StdoutDropped > 0
	return res, nil
}

// TypeInput types what in gives at the terminal, then its end as the
// terminal's end-of-file character (twice when the last line has no
// newline: the first one only ends that line). A write the command does
// not read blocks here until Run closes the master.
func TypeInput(master *os.File, in io.Reader) {
	buf := make([]byte, 32<<10)
	var last byte = '\n'
	for {
		n, err := in.Read(buf)
		if n > 0 {
			if _, werr := master.Write(buf[:n]); werr != nil {
				return
			}
			last = buf[n-1]
		}
		if err != nil {
			break
		}
	}
	eof := ttyEOF(master)
	if last != '\n' {
		master.Write([]byte{eof})
	}
	master.Write([]byte{eof})
}
