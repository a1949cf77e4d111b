package mailbox

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// The encodings below are pure: bytes in, bytes out. The host's mailbox
// server (package bridge) reads and writes the files; a second
// implementation checks itself against the golden vectors in the
// repository's testdata/vectors (argv.txtar, exit.txtar, ack.txtar).

// Limits bound what a call may send (see [DecodeArgv]).
type Limits struct {
	MaxArgs       int
	MaxArgBytes   int64 // all arguments together
	MaxStdinBytes int64
}

// LimitError is a call over one of [Limits]. Limit names the limit as the
// host's limits name it ("max_args", "max_arg_bytes", "max_stdin_bytes",
// "max_calls"); the layer that owns the setting names its config key.
type LimitError struct {
	Limit string
	What  string // "more than 8 arguments"
}

func (e *LimitError) Error() string { return e.What + " (limit " + e.Limit + ")" }

// EncodeArgv returns the argv file of a v2 call: the caller's working
// directory, the gate name and the arguments, each ended by a NUL byte.
// None may hold a NUL.
func EncodeArgv(cwd, gate string, args []string) []byte {
	n := len(cwd) + len(gate) + 2
	for _, a := range args {
		n += len(a) + 1
	}
	b := make([]byte, 0, n)
	b = append(append(b, cwd...), 0)
	b = append(append(b, gate...), 0)
	for _, a := range args {
		b = append(append(b, a...), 0)
	}
	return b
}

// ArgvMax is the largest argv file a call within lim can send: a reader
// refuses a longer one unread (as over MaxArgBytes).
func ArgvMax(lim Limits) int64 {
	return MaxCwdLen + 1 + MaxNameLen + 1 + lim.MaxArgBytes + int64(lim.MaxArgs)
}

// ErrArgvMalformed: an argv file that is not a list of NUL-ended words
// (at least the working directory and the gate name).
var ErrArgvMalformed = errors.New("not a list of NUL-ended words: the working directory, the gate name, the arguments")

// DecodeArgv decodes an argv file (see [EncodeArgv]), enforcing lim:
// more arguments or argument bytes than it allows is a [*LimitError]; a
// working directory longer than [MaxCwdLen], a gate name longer than
// [MaxNameLen], or bytes that are not NUL-ended words are other errors.
// The gate name is not validated here.
func DecodeArgv(b []byte, lim Limits) (cwd, gate string, args []string, err error) {
	if len(b) == 0 || b[len(b)-1] != 0 || bytes.Count(b, []byte{0}) < 2 {
		return "", "", nil, fmt.Errorf("%s: %w", FileArgv, ErrArgvMalformed)
	}
	i := bytes.IndexByte(b, 0)
	if i > MaxCwdLen {
		return "", "", nil, fmt.Errorf("working directory longer than %d bytes", MaxCwdLen)
	}
	cwd, b = string(b[:i]), b[i+1:]
	i = bytes.IndexByte(b, 0)
	if i > MaxNameLen {
		return "", "", nil, fmt.Errorf("gate name longer than %d bytes", MaxNameLen)
	}
	gate, b = string(b[:i]), b[i+1:]
	n := bytes.Count(b, []byte{0})
	if n > lim.MaxArgs {
		return "", "", nil, &LimitError{"max_args", fmt.Sprintf("more than %d arguments", lim.MaxArgs)}
	}
	if int64(len(b)-n) > lim.MaxArgBytes {
		return "", "", nil, ErrArgBytes(lim)
	}
	args = make([]string, 0, n)
	for len(b) > 0 {
		i := bytes.IndexByte(b, 0)
		args = append(args, string(b[:i]))
		b = b[i+1:]
	}
	return cwd, gate, args, nil
}

// ErrArgBytes is the refusal of arguments over lim.MaxArgBytes.
func ErrArgBytes(lim Limits) *LimitError {
	return &LimitError{"max_arg_bytes", fmt.Sprintf("arguments exceed %d bytes", lim.MaxArgBytes)}
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

// EncodeExit returns the exit file of answer a in the given protocol
// version and whether the output is inline in it; when it is not, the
// output goes to the .stdout and .stderr files beside it. A code outside
// 0..255 is sent as 1.
func EncodeExit(version int, a Answer) (exit []byte, inline bool) {
	code := a.Code
	if code < 0 || code > 255 {
		code = 1
	}
	inline = version >= 2 && a.Size() <= InlineMax && inlineText(a.Stdout) && inlineText(a.Stderr)
	n := 4
	if inline {
		n += int(a.Size()) + 2*(bytes.Count(a.Stdout, nl)+bytes.Count(a.Stderr, nl)+2)
	} else if version >= 2 {
		n += 2
	}
	exit = make([]byte, 0, n)
	exit = strconv.AppendInt(exit, int64(code), 10)
	exit = append(exit, '\n')
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

var nl = []byte{'\n'}

// ErrExitMalformed: an exit file whose first line is not an exit code
// 0..255 in decimal digits, ended by a newline (a wrapper fails with 1:
// "malformed exit code from the host").
var ErrExitMalformed = errors.New("malformed exit code")

// DecodeExit decodes an exit file as a wrapper reads it: the code on the
// first line, then the mode; with [ModeInline] the output follows in
// lines (see the package doc; a line with another prefix, or a last one
// without a newline, is skipped as the wrapper skips it) and inline is
// true; otherwise (v1, or [ModeFiles]) the output is in the .stdout and
// .stderr files beside it, which the caller reads.
func DecodeExit(b []byte) (a Answer, inline bool, err error) {
	line, rest, ok := bytes.Cut(b, nl)
	code := 0
	for _, c := range line {
		if c < '0' || c > '9' || code > 255 {
			ok = false
			break
		}
		code = code*10 + int(c-'0')
	}
	if !ok || len(line) == 0 || code > 255 {
		return Answer{}, false, ErrExitMalformed
	}
	a.Code = code
	mode, rest, ok := bytes.Cut(rest, nl)
	if !ok || string(mode) != ModeInline {
		return a, false, nil
	}
	for {
		line, after, ok := bytes.Cut(rest, nl)
		if !ok || len(line) == 0 {
			if !ok {
				return a, true, nil
			}
			rest = after
			continue
		}
		switch line[0] {
		case LineStdout:
			a.Stdout = append(append(a.Stdout, line[1:]...), '\n')
		case LineStdoutPartial:
			a.Stdout = append(a.Stdout, line[1:]...)
		case LineStderr:
			a.Stderr = append(append(a.Stderr, line[1:]...), '\n')
		case LineStderrPartial:
			a.Stderr = append(a.Stderr, line[1:]...)
		}
		rest = after
	}
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

// Streamable reports whether data can travel in a stream file
// (responses/<id>.stream): the inline answer's rule (ASCII without NUL),
// which every shell's read passes through intact.
func Streamable(data []byte) bool { return inlineText(data) }

// StreamLines frames data (which must be [Streamable]) as stream lines of
// stdout, or of stderr: the inline answer's line format.
func StreamLines(stderr bool, data []byte) []byte {
	if stderr {
		return appendLines(nil, data, LineStderr, LineStderrPartial)
	}
	return appendLines(nil, data, LineStdout, LineStdoutPartial)
}

// AckName is the name of the acknowledgement of call id in calls/: the
// wrapper creates it once it has printed the answer (see [ParseAck]).
func AckName(id string) string { return id + AckSuffix }
