package mailbox

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ExtStream names responses/<id>.stream: the output of a call that runs
// long, written while its gate runs, in the inline answer's line format
// (o, O, e, E lines). A v2 client follows it while it waits (it is woken
// through the FIFO after each append) and reads it to its end once the
// exit file exists; the exit file then holds only what was not streamed.
const ExtStream = ".stream"

// Stream is the host's end of responses/<id>.stream.
type Stream struct {
	f *os.File
	n int64 // bytes written
}

// OpenStream creates responses/<id>.stream (never replacing anything).
func (b *Box) OpenStream(id string) (*Stream, error) {
	fd, err := ignoringEINTR(func() (int, error) {
		return unix.Openat(b.respFd, id+ExtStream, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o640)
	})
	if err != nil {
		return nil, fmt.Errorf("create %s%s: %w", id, ExtStream, err)
	}
	return &Stream{f: os.NewFile(uintptr(fd), id+ExtStream)}, nil
}

// Streamable reports whether data can travel in a stream: the inline
// answer's rule (ASCII without NUL), which every shell's read passes
// through intact.
func Streamable(data []byte) bool { return inlineText(data) }

// StreamLines frames data (which must be [Streamable]) as stream lines of
// stdout, or of stderr.
func StreamLines(stderr bool, data []byte) []byte {
	if stderr {
		return appendLines(nil, data, LineStderr, LineStderrPartial)
	}
	return appendLines(nil, data, LineStdout, LineStdoutPartial)
}

// Write appends lines made by [StreamLines], in one write.
func (s *Stream) Write(lines []byte) error {
	n, err := s.f.Write(lines)
	s.n += int64(n)
	return err
}

// Size is the number of bytes written to the stream file.
func (s *Stream) Size() int64 { return s.n }

// Close closes the stream file (it stays until the call is acknowledged).
func (s *Stream) Close() error { return s.f.Close() }
