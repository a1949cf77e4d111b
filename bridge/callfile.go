package bridge

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
	"github.com/gatebridge/gatebridge/internal/hostilefs"
	"github.com/gatebridge/gatebridge/internal/lossless"
)

// box is the mailbox server's handle on a session's mailbox: descriptors
// of calls/ and responses/, through which every hostile entry is reached
// without following links (internal/hostilefs). It is safe for concurrent
// use.
type box struct {
	layout          mailbox.Layout
	callsFd, respFd int
	serial          atomic.Uint64
}

// openBox opens the mailbox of the session at l (calls/ and responses/
// must exist and be real directories).
func openBox(l mailbox.Layout) (*box, error) {
	callsFd, err := unix.Open(l.Calls, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("mailbox: open calls dir: %w", err)
	}
	respFd, err := unix.Open(l.Responses, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(callsFd)
		return nil, fmt.Errorf("mailbox: open responses dir: %w", err)
	}
	return &box{layout: l, callsFd: callsFd, respFd: respFd}, nil
}

// close closes the descriptors.
func (b *box) close() {
	unix.Close(b.callsFd)
	unix.Close(b.respFd)
	b.callsFd, b.respFd = -1, -1
}

// list returns up to max+1 names in calls/ (call ids, acknowledgements,
// and whatever else the sandbox put there).
func (b *box) list(max int) ([]string, error) { return hostilefs.ListDir(b.callsFd, max) }

// openCall opens calls/<id> (never following a link). The error is a
// [*hostilefs.FileError] wrapping ENOENT when there is no such entry.
func (b *box) openCall(id string) (*callDir, error) {
	fd, err := hostilefs.OpenDirAt(b.callsFd, id)
	if err != nil {
		return nil, err
	}
	return &callDir{id: id, fd: fd}, nil
}

// remove removes calls/<name> and what is below it, at most budget
// entries (a hostile call cannot make the host walk forever).
//
// The entry is first moved out of calls/ (into responses/, where the
// sandbox cannot write) and removed there, so its name is gone at once: a
// wrapper that listed a call slot before it was answered cannot claim the
// name again while the host empties the directory (its exclusive create
// of argv would succeed once the old argv was unlinked, and it would wait
// for an answer that never comes). What the budget leaves stays in
// responses/ until the session is removed.
func (b *box) remove(name string, budget int) error {
	gone := ".gone-" + strconv.FormatUint(b.serial.Add(1), 10)
	if hostilefs.RenameNoReplace(b.callsFd, name, b.respFd, gone) == nil {
		return hostilefs.RemoveAllAt(b.respFd, gone, &budget)
	}
	return hostilefs.RemoveAllAt(b.callsFd, name, &budget)
}

// removeAnswer removes the response files of call id.
func (b *box) removeAnswer(id string) {
	for _, ext := range []string{mailbox.ExtStdout, mailbox.ExtStderr, mailbox.ExtExit, mailbox.ExtStream} {
		unix.Unlinkat(b.respFd, id+ext, 0)
	}
}

// respond writes the answer to call id in the given protocol version
// ([mailbox.EncodeExit]), the exit file last, each file atomically (temp
// file, rename). A failed write leaves no file of the answer behind.
func (b *box) respond(id string, version int, a mailbox.Answer) error {
	err := b.writeAnswer(id, version, a)
	if err != nil {
		b.removeAnswer(id)
	}
	return err
}

func (b *box) writeAnswer(id string, version int, a mailbox.Answer) error {
	exit, inline := mailbox.EncodeExit(version, a)
	if !inline {
		for _, f := range []struct {
			ext  string
			data []byte
		}{{mailbox.ExtStdout, a.Stdout}, {mailbox.ExtStderr, a.Stderr}} {
			if len(f.data) == 0 {
				continue
			}
			if err := hostilefs.WriteFileAt(b.respFd, id+f.ext, f.data, 0); err != nil {
				return fmt.Errorf("response: %w", err)
			}
		}
	}
	if err := hostilefs.WriteFileAt(b.respFd, id+mailbox.ExtExit, exit, 0); err != nil {
		return fmt.Errorf("response: %w", err)
	}
	return nil
}

// errSlotsUnsupported: this system cannot prepare slots (no mkfifoat).
var errSlotsUnsupported = errors.New("mailbox: call slots are not supported here")

// makeSlot prepares the call slot calls/<name> (see [mailbox.SlotPrefix]):
// a directory the sandbox can write exactly as it can write calls/ (same
// owner, or calls/' default ACL), holding a wake FIFO it can open. The
// slot is built under responses/ (where the sandbox cannot write) and
// moved into calls/ only when complete, never replacing an entry there
// (EEXIST).
func (b *box) makeSlot(name string) error {
	if !hostilefs.CanMkfifoAt {
		return errSlotsUnsupported
	}
	if !mailbox.ValidID(name) {
		return errors.New("mailbox: invalid slot name")
	}
	if _, err := hostilefs.StatAt(b.respFd, name+mailbox.ExtExit); err == nil {
		return unix.EEXIST // answered before: a caller could read that answer
	}
	tmp := ".slot-" + name
	if err := unix.Mkdirat(b.respFd, tmp, 0o770); err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			budget := 4
			hostilefs.RemoveAllAt(b.respFd, tmp, &budget)
		}
	}()
	fd, err := hostilefs.OpenDirAt(b.respFd, tmp)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var calls unix.Stat_t
	if err := unix.Fstat(b.callsFd, &calls); err != nil {
		return err
	}
	acl, err := hostilefs.CopyDefaultACL(b.callsFd, fd)
	if err != nil {
		return err
	}
	if !acl {
		if err := unix.Fchmod(fd, 0o700); err != nil {
			return err
		}
	}
	if int(calls.Uid) != unix.Geteuid() || int(calls.Gid) != unix.Getegid() {
		if err := unix.Fchown(fd, int(calls.Uid), int(calls.Gid)); err != nil {
			return err
		}
	}
	hostilefs.MkfifoForOwnerAt(fd, mailbox.FileWake)
	if st, err := hostilefs.StatAt(fd, mailbox.FileWake); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return errors.New("mailbox: slot: no wake FIFO")
	}
	if err := hostilefs.RenameNoReplace(b.respFd, tmp, b.callsFd, name); err != nil {
		return err
	}
	ok = true
	return nil
}

// callDir is one open call directory calls/<id>.
type callDir struct {
	id string
	fd int
}

// close closes the directory.
func (c *callDir) close() error {
	if c.fd < 0 {
		return nil
	}
	err := unix.Close(c.fd)
	c.fd = -1
	return err
}

// errNotReady is returned by [callDir.ready] while the call has no ready
// marker yet.
var errNotReady = errors.New("mailbox: call not ready")

// ready returns nil once the call's ready marker exists, errNotReady
// before, and an error for a marker that is not a regular file.
func (c *callDir) ready() error {
	err := hostilefs.CheckRegularAt(c.fd, mailbox.FileReady)
	if errors.Is(err, unix.ENOENT) {
		return errNotReady
	}
	return err
}

// callData is a call as read from its directory.
type callData struct {
	version int // 1 or 2: answer in the same version
	// cwd is the caller's working directory as the sandbox sees it
	// (untrusted: a gate maps it onto its own tree); "" when not sent
	// (v1).
	cwd   string
	gate  string
	args  []string
	stdin []byte // nil: none sent
}

// read reads a ready call, enforcing lim: v2 (an argv file) or v1 (a gate
// file and an args/ directory). Errors are [*mailbox.LimitError],
// [*hostilefs.FileError] (refused entries: see [hostilefs.Refused]) or
// describe a malformed call.
func (c *callDir) read(lim mailbox.Limits) (*callData, error) {
	call := &callData{version: 2}
	err := c.readArgv(call, lim)
	if errors.Is(err, unix.ENOENT) {
		call.version = 1
		err = c.readV1(call, lim)
	}
	if err != nil {
		return nil, err
	}
	stdin, err := hostilefs.ReadFileAt(c.fd, mailbox.FileStdin, lim.MaxStdinBytes)
	switch {
	case err == nil:
		call.stdin = stdin
	case errors.Is(err, unix.ENOENT):
	case errors.Is(err, hostilefs.ErrTooLarge):
		return nil, &mailbox.LimitError{Limit: "max_stdin_bytes", What: fmt.Sprintf("stdin exceeds %d bytes", lim.MaxStdinBytes)}
	default:
		return nil, fmt.Errorf("call %w", err)
	}
	return call, nil
}

// readArgv reads the v2 argv file ([mailbox.DecodeArgv]). It returns an
// error wrapping ENOENT when there is none.
func (c *callDir) readArgv(call *callData, lim mailbox.Limits) error {
	b, err := hostilefs.ReadFileAt(c.fd, mailbox.FileArgv, mailbox.ArgvMax(lim))
	switch {
	case errors.Is(err, unix.ENOENT):
		return err
	case errors.Is(err, hostilefs.ErrTooLarge):
		return mailbox.ErrArgBytes(lim)
	case err != nil:
		return fmt.Errorf("call %w", err)
	}
	call.cwd, call.gate, call.args, err = mailbox.DecodeArgv(b, lim)
	if errors.Is(err, mailbox.ErrArgvMalformed) {
		return fmt.Errorf("call %w", err)
	}
	return err
}

// readV1 reads the v1 gate file and args/ directory (files 0..N-1).
func (c *callDir) readV1(call *callData, lim mailbox.Limits) error {
	g, err := hostilefs.ReadFileAt(c.fd, mailbox.FileGate, mailbox.MaxNameLen)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("call has neither %s (v2) nor %s (v1)", mailbox.FileArgv, mailbox.FileGate)
		}
		if errors.Is(err, hostilefs.ErrTooLarge) {
			return fmt.Errorf("gate name longer than %d bytes", mailbox.MaxNameLen)
		}
		return fmt.Errorf("call %w", err)
	}
	call.gate = string(g)
	return c.readArgs(call, lim)
}

// readArgs reads the v1 args/ directory: files 0..N-1.
func (c *callDir) readArgs(call *callData, lim mailbox.Limits) error {
	argsFd, err := hostilefs.OpenDirAt(c.fd, mailbox.DirArgs)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil // no args/ directory: no arguments
	case err != nil:
		return fmt.Errorf("call %w", err)
	}
	defer unix.Close(argsFd)
	names, err := hostilefs.ListDir(argsFd, lim.MaxArgs)
	if err != nil {
		return fmt.Errorf("call args: %w", err)
	}
	if len(names) > lim.MaxArgs {
		return &mailbox.LimitError{Limit: "max_args", What: fmt.Sprintf("more than %d arguments", lim.MaxArgs)}
	}
	call.args = make([]string, len(names))
	seen := make([]bool, len(names))
	var total int64
	for _, n := range names {
		i, err := strconv.Atoi(n)
		if err != nil || i < 0 || i >= len(names) || strconv.Itoa(i) != n || seen[i] {
			return fmt.Errorf("call args: unexpected entry %s (want files 0..%d)", lossless.QuoteCap(n, 32), len(names)-1)
		}
		seen[i] = true
		b, err := hostilefs.ReadFileAt(argsFd, n, lim.MaxArgBytes-total)
		if err != nil {
			if errors.Is(err, hostilefs.ErrTooLarge) {
				return mailbox.ErrArgBytes(lim)
			}
			return fmt.Errorf("call args/%w", err)
		}
		if bytes.IndexByte(b, 0) >= 0 {
			return fmt.Errorf("call args/%s contains a NUL byte", n)
		}
		call.args[i] = string(b)
		total += int64(len(b))
	}
	return nil
}

// prepareWake creates the call's wake FIFO before the wrapper does
// ([hostilefs.MkfifoForOwnerAt]), so the wrapper can skip its own mkfifo
// (a process start, about a third of a call's cost); best effort.
func (c *callDir) prepareWake() { hostilefs.MkfifoForOwnerAt(c.fd, mailbox.FileWake) }

// wake writes one byte to the call's wake FIFO, if it has one with a
// reader. It never blocks; no FIFO or no reader is not an error.
func (c *callDir) wake() error { return hostilefs.WakeAt(c.fd, mailbox.FileWake) }

// waiting reports whether a wrapper is blocked on the call's wake FIFO
// (someone holds it open for reading). known is false when that cannot be
// told: no FIFO (a polling client), or not a FIFO.
func (c *callDir) waiting() (waiting, known bool) { return hostilefs.HasReader(c.fd, mailbox.FileWake) }

// canceled reports whether the caller left a cancel marker: its wrapper
// was stopped by a signal and no longer wants the answer.
func (c *callDir) canceled() bool {
	_, err := hostilefs.StatAt(c.fd, mailbox.FileCancel)
	return err == nil
}

// stream is the host's end of responses/<id>.stream (see
// [mailbox.ExtStream]).
type stream struct {
	f *os.File
	n int64 // bytes written
}

// openStream creates responses/<id>.stream (never replacing anything).
func (b *box) openStream(id string) (*stream, error) {
	fd, err := unix.Openat(b.respFd, id+mailbox.ExtStream, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o640)
	for err == unix.EINTR {
		fd, err = unix.Openat(b.respFd, id+mailbox.ExtStream, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o640)
	}
	if err != nil {
		return nil, fmt.Errorf("create %s%s: %w", id, mailbox.ExtStream, err)
	}
	return &stream{f: os.NewFile(uintptr(fd), id+mailbox.ExtStream)}, nil
}

// write appends lines made by [mailbox.StreamLines], in one write.
func (s *stream) write(lines []byte) error {
	n, err := s.f.Write(lines)
	s.n += int64(n)
	return err
}

// size is the number of bytes written to the stream file.
func (s *stream) size() int64 { return s.n }

// close closes the stream file (it stays until the call is acknowledged).
func (s *stream) close() error { return s.f.Close() }
