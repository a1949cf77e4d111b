package bridge

import (
	"bytes"
	"io"
	"sync"
)

// SubmitPrefix starts a line of a command's stdout that gives the run's
// answer when no submit call was made (see [Config.SubmitLines]).
const SubmitPrefix = "SUBMIT:"

// submitLines passes a command's stdout on, unchanged, and remembers the
// last line that starts with [SubmitPrefix]. It keeps at most max bytes of
// the line it is reading, and only while that line may be an answer: a
// longer answer line is not an answer (it is not cut short). Writes never
// fail: once the writer it passes to fails, it stops passing, as the
// backends do with a live writer, and goes on watching.
type submitLines struct {
	mu    sync.Mutex
	to    io.Writer // nil: nothing to pass on
	max   int
	line  []byte // the start of the current line, while it may be an answer
	in    bool   // the current line began with the prefix (so far)
	skip  bool   // the current line cannot be an answer: wait for its end
	ans   []byte
	found bool
}

func newSubmitLines(to io.Writer, max int) *submitLines {
	return &submitLines{to: to, max: max}
}

func (s *submitLines) Write(p []byte) (int, error) {
	n := len(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.to != nil {
		if _, err := s.to.Write(p); err != nil {
			s.to = nil
		}
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		s.add(chunk)
		if i < 0 {
			break
		}
		s.end()
		p = p[i+1:]
	}
	return n, nil
}

// add takes the next bytes of the current line (no newline in b).
func (s *submitLines) add(b []byte) {
	if s.skip || len(b) == 0 {
		return
	}
	s.line = append(s.line, b...)
	if !s.in {
		n := min(len(s.line), len(SubmitPrefix))
		if string(s.line[:n]) != SubmitPrefix[:n] {
			s.skip, s.line = true, s.line[:0]
			return
		}
		s.in = n == len(SubmitPrefix)
	}
	if len(s.line) > len(SubmitPrefix)+s.max+1 { // +1: a \r before the newline
		s.skip, s.line = true, s.line[:0]
	}
}

// end ends the current line.
func (s *submitLines) end() {
	if s.in && !s.skip {
		a := bytes.TrimSuffix(s.line[len(SubmitPrefix):], []byte("\r"))
		a = bytes.TrimLeft(a, " \t")
		a = bytes.TrimRight(a, " \t")
		if len(a) <= s.max {
			s.ans, s.found = append(s.ans[:0], a...), true
		}
	}
	s.line, s.in, s.skip = s.line[:0], false, false
}

// answer returns the last answer line's answer, a last line without a
// newline included; nothing for a nil s.
func (s *submitLines) answer() (string, bool) {
	if s == nil {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.line) > 0 {
		s.end()
	}
	return string(s.ans), s.found
}
