package mailbox

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/internal/lossless"
)

// Box is the host's handle on a session's mailbox: descriptors of calls/
// and responses/, through which every hostile entry is reached without
// following links. It is safe for concurrent use.
type Box struct {
	layout          Layout
	callsFd, respFd int
	serial          atomic.Uint64
}

// Open opens the mailbox of the session at l (calls/ and responses/ must
// exist and be real directories).
func Open(l Layout) (*Box, error) {
	b := &Box{layout: l, callsFd: -1, respFd: -1}
	var err error
	if b.callsFd, err = unix.Open(l.Calls, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("mailbox: open calls dir: %w", err)
	}
	if b.respFd, err = unix.Open(l.Responses, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != nil {
		unix.Close(b.callsFd)
		return nil, fmt.Errorf("mailbox: open responses dir: %w", err)
	}
	return b, nil
}

// Layout returns the session's paths.
func (b *Box) Layout() Layout { return b.layout }

// Close closes the descriptors.
func (b *Box) Close() error {
	unix.Close(b.callsFd)
	unix.Close(b.respFd)
	b.callsFd, b.respFd = -1, -1
	return nil
}

// List returns up to max+1 names in calls/ (call ids, acknowledgements,
// and whatever else the sandbox put there).
func (b *Box) List(max int) ([]string, error) { return readDirNames(b.callsFd, max) }

// OpenCall opens calls/<id> (never following a link). The error is an
// [*FileError] wrapping ENOENT when there is no such entry.
func (b *Box) OpenCall(id string) (*CallDir, error) {
	fd, err := openDirAt(b.callsFd, id)
	if err != nil {
		return nil, err
	}
	return &CallDir{ID: id, fd: fd}, nil
}

// Remove removes calls/<name> and what is below it, at most budget entries
// (a hostile call cannot make the host walk forever).
//
// The entry is first moved out of calls/ (into responses/, where the
// sandbox cannot write) and removed there, so its name is gone at once: a
// wrapper that listed a call slot before it was answered cannot claim the
// name again while the host empties the directory (its exclusive create
// of argv would succeed once the old argv was unlinked, and it would wait
// for an answer that never comes). What the budget leaves stays in
// responses/ until the session is removed.
func (b *Box) Remove(name string, budget int) error {
	gone := ".gone-" + strconv.FormatUint(b.serial.Add(1), 10)
	if renameNoReplace(b.callsFd, name, b.respFd, gone) == nil {
		return removeAllAt(b.respFd, gone, &budget)
	}
	return removeAllAt(b.callsFd, name, &budget)
}

// RemoveAnswer removes the response files of call id.
func (b *Box) RemoveAnswer(id string) {
	for _, ext := range []string{ExtStdout, ExtStderr, ExtExit, ExtStream} {
		unix.Unlinkat(b.respFd, id+ext, 0)
	}
}

// Answer is what the host writes back for one call.
type Answer struct {
	Code           int
	Stdout, Stderr []byte
}

// InlineMax is the largest output a v2 answer carries inside its exit file
// (the wrapper prints it with shell builtins; more is cheaper with cat).
const InlineMax = 1024

// Size is the number of bytes the answer holds.
func (a *Answer) Size() int64 { return int64(len(a.Stdout) + len(a.Stderr)) }

// Respond writes the answer to call id in the given protocol version,
// the exit file last, each file atomically (temp file, rename). A failed
// write leaves no file of the answer behind.
func (b *Box) Respond(id string, version int, a Answer) error {
	err := b.respond(id, version, a)
	if err != nil {
		b.RemoveAnswer(id)
	}
	return err
}

// EncodeExit returns the exit file of answer a in the given protocol
// version and whether the output is inline in it; when it is not, the
// output goes to the .stdout and .stderr files beside it.
func EncodeExit(version int, a Answer) (exit []byte, inline bool) {
	code := a.Code
	if code < 0 || code > 255 {
		code = 1
	}
	exit = strconv.AppendInt(nil, int64(code), 10)
	exit = append(exit, '\n')
	inline = version >= 2 && a.Size() <= InlineMax && inlineText(a.Stdout) && inlineText(a.Stderr)
	switch {
	case inline:
		exit = append(exit, ModeInline+"\n"...)
		exit = appendLines(exit, a.Stdout, LineStdout, LineStdoutPartial)
		exit = appendLines(exit, a.Stderr, LineStderr, LineStderrPartial)
	case version >= 2:
		exit = append(exit, ModeFiles+"\n"...)
	}
	return exit, inline
}

func (b *Box) respond(id string, version int, a Answer) error {
	suffix := strconv.FormatUint(b.serial.Add(1), 36)
	exit, inline := EncodeExit(version, a)
	if !inline {
		for _, f := range []struct {
			ext  string
			data []byte
		}{{ExtStdout, a.Stdout}, {ExtStderr, a.Stderr}} {
			if len(f.data) == 0 {
				continue
			}
			if err := writeFileAtomic(b.respFd, id+f.ext, f.data, suffix); err != nil {
				return fmt.Errorf("response: %w", err)
			}
		}
	}
	if err := writeFileAtomic(b.respFd, id+ExtExit, exit, suffix); err != nil {
		return fmt.Errorf("response: %w", err)
	}
	return nil
}

// inlineText reports whether every shell's read builtin passes b through
// intact: ASCII without NUL (yash in the C locale fails on any byte past
// 0x7f).
func inlineText(b []byte) bool {
	for _, c := range b {
		if c == 0 || c >= 0x80 {
			return false
		}
	}
	return true
}

// appendLines appends data to b one line at a time, each prefixed with
// full, or with partial for a last line without a newline.
func appendLines(b, data []byte, full, partial byte) []byte {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			b = append(b, partial)
			b = append(b, data...)
			return append(b, '\n')
		}
		b = append(b, full)
		b = append(b, data[:i+1]...)
		data = data[i+1:]
	}
	return b
}

// CallDir is one open call directory calls/<id>.
type CallDir struct {
	ID string
	fd int
}

// Fd is the directory's descriptor (to watch it; the CallDir owns it).
func (c *CallDir) Fd() int { return c.fd }

// Close closes the directory.
func (c *CallDir) Close() error {
	if c.fd < 0 {
		return nil
	}
	err := unix.Close(c.fd)
	c.fd = -1
	return err
}

// ErrNotReady is returned by [CallDir.Ready] while the call has no ready
// marker yet.
var ErrNotReady = errors.New("mailbox: call not ready")

// Ready returns nil once the call's ready marker exists, [ErrNotReady]
// before, and an error for a marker that is not a regular file.
func (c *CallDir) Ready() error {
	st, err := statAt(c.fd, FileReady)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return ErrNotReady
		}
		return &FileError{FileReady, err}
	}
	return checkRegular(FileReady, &st)
}

// Limits bound what [CallDir.Read] accepts.
type Limits struct {
	MaxArgs       int
	MaxArgBytes   int64 // all arguments together
	MaxStdinBytes int64
}

// LimitError is a call over one of [Limits]; Key names the config key
// (bridge.limits.KEY) that sets it.
type LimitError struct {
	What string
	Key  string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s (limit set by bridge.limits.%s)", e.What, e.Key)
}

// Call is a call as read from its directory.
type Call struct {
	Version int // 1 or 2: answer in the same version
	// Cwd is the caller's working directory as the sandbox sees it
	// (untrusted: a gate maps it onto its own tree); "" when not sent
	// (v1).
	Cwd   string
	Gate  string
	Args  []string
	Stdin []byte // nil: none sent
	Bytes int64  // gate name, arguments and stdin
}

// Read reads a ready call, enforcing lim: v2 (an argv file) or v1 (a gate
// file and an args/ directory). Errors are [*LimitError], [*FileError]
// (refused entries: see [Refused]) or describe a malformed call.
func (c *CallDir) Read(lim Limits) (*Call, error) {
	call := &Call{Version: 2}
	err := c.readArgv(call, lim)
	if errors.Is(err, unix.ENOENT) {
		call.Version = 1
		err = c.readV1(call, lim)
	}
	if err != nil {
		return nil, err
	}
	stdin, err := readFileAt(c.fd, FileStdin, lim.MaxStdinBytes)
	switch {
	case err == nil:
		call.Stdin = stdin
		call.Bytes += int64(len(stdin))
	case errors.Is(err, unix.ENOENT):
	case errors.Is(err, ErrTooLarge):
		return nil, &LimitError{fmt.Sprintf("stdin exceeds %d bytes", lim.MaxStdinBytes), "max_stdin_bytes"}
	default:
		return nil, fmt.Errorf("call %w", err)
	}
	return call, nil
}

// readArgv reads the v2 argv file: the caller's working directory, the
// gate name and the arguments, each ended by a NUL. It returns an error
// wrapping ENOENT when there is none.
func (c *CallDir) readArgv(call *Call, lim Limits) error {
	b, err := readFileAt(c.fd, FileArgv, MaxCwdLen+1+MaxNameLen+1+lim.MaxArgBytes+int64(lim.MaxArgs))
	switch {
	case errors.Is(err, unix.ENOENT):
		return err
	case errors.Is(err, ErrTooLarge):
		return &LimitError{fmt.Sprintf("arguments exceed %d bytes", lim.MaxArgBytes), "max_arg_bytes"}
	case err != nil:
		return fmt.Errorf("call %w", err)
	}
	if len(b) == 0 || b[len(b)-1] != 0 || bytes.Count(b, []byte{0}) < 2 {
		return fmt.Errorf("call %s: not a list of NUL-ended words: the working directory, the gate name, the arguments", FileArgv)
	}
	i := bytes.IndexByte(b, 0)
	if i > MaxCwdLen {
		return fmt.Errorf("working directory longer than %d bytes", MaxCwdLen)
	}
	call.Cwd, b = string(b[:i]), b[i+1:]
	i = bytes.IndexByte(b, 0)
	if i > MaxNameLen {
		return fmt.Errorf("gate name longer than %d bytes", MaxNameLen)
	}
	call.Gate, b = string(b[:i]), b[i+1:]
	n := bytes.Count(b, []byte{0})
	if n > lim.MaxArgs {
		return &LimitError{fmt.Sprintf("more than %d arguments", lim.MaxArgs), "max_args"}
	}
	if int64(len(b)-n) > lim.MaxArgBytes {
		return &LimitError{fmt.Sprintf("arguments exceed %d bytes", lim.MaxArgBytes), "max_arg_bytes"}
	}
	call.Bytes = int64(len(call.Gate) + len(b) - n)
	call.Args = make([]string, 0, n)
	for len(b) > 0 {
		i := bytes.IndexByte(b, 0)
		call.Args = append(call.Args, string(b[:i]))
		b = b[i+1:]
	}
	return nil
}

// readV1 reads the v1 gate file and args/ directory (files 0..N-1).
func (c *CallDir) readV1(call *Call, lim Limits) error {
	g, err := readFileAt(c.fd, FileGate, MaxNameLen)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("call has neither %s (v2) nor %s (v1)", FileArgv, FileGate)
		}
		if errors.Is(err, ErrTooLarge) {
			return fmt.Errorf("gate name longer than %d bytes", MaxNameLen)
		}
		return fmt.Errorf("call %w", err)
	}
	call.Gate = string(g)
	call.Bytes = int64(len(g))
	return c.readArgs(call, lim)
}

// readArgs reads the v1 args/ directory: files 0..N-1.
func (c *CallDir) readArgs(call *Call, lim Limits) error {
	argsFd, err := openDirAt(c.fd, DirArgs)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil // no args/ directory: no arguments
	case err != nil:
		return fmt.Errorf("call %w", err)
	}
	defer unix.Close(argsFd)
	names, err := readDirNames(argsFd, lim.MaxArgs)
	if err != nil {
		return fmt.Errorf("call args: %w", err)
	}
	if len(names) > lim.MaxArgs {
		return &LimitError{fmt.Sprintf("more than %d arguments", lim.MaxArgs), "max_args"}
	}
	call.Args = make([]string, len(names))
	seen := make([]bool, len(names))
	var total int64
	for _, n := range names {
		i, err := strconv.Atoi(n)
		if err != nil || i < 0 || i >= len(names) || strconv.Itoa(i) != n || seen[i] {
			return fmt.Errorf("call args: unexpected entry %s (want files 0..%d)", QuoteCap(n, 32), len(names)-1)
		}
		seen[i] = true
		b, err := readFileAt(argsFd, n, lim.MaxArgBytes-total)
		if err != nil {
			if errors.Is(err, ErrTooLarge) {
				return &LimitError{fmt.Sprintf("arguments exceed %d bytes", lim.MaxArgBytes), "max_arg_bytes"}
			}
			return fmt.Errorf("call args/%w", err)
		}
		if bytes.IndexByte(b, 0) >= 0 {
			return fmt.Errorf("call args/%s contains a NUL byte", n)
		}
		call.Args[i] = string(b)
		total += int64(len(b))
	}
	call.Bytes += total
	return nil
}

// PrepareWake creates the call's wake FIFO before the wrapper does (see
// makeWakeAt); best effort.
func (c *CallDir) PrepareWake() { makeWakeAt(c.fd) }

// Wake writes one byte to the call's wake FIFO, if it has one with a
// reader. It never blocks; no FIFO or no reader is not an error.
func (c *CallDir) Wake() error { return wakeAt(c.fd, FileWake) }

// Waiting reports whether a wrapper is blocked on the call's wake FIFO
// (someone holds it open for reading). known is false when that cannot be
// told: no FIFO (a polling client), or not a FIFO.
func (c *CallDir) Waiting() (waiting, known bool) { return hasReader(c.fd, FileWake) }

// Canceled reports whether the caller left a cancel marker: its wrapper
// was stopped by a signal and no longer wants the answer.
func (c *CallDir) Canceled() bool {
	_, err := statAt(c.fd, FileCancel)
	return err == nil
}

// QuoteCap quotes s, cut to n bytes, for messages about hostile names:
// the one quoted form of [lossless.QuoteCap].
func QuoteCap(s string, n int) string { return lossless.QuoteCap(s, n) }
