package bridge

import (
	"sync"
	"time"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
)

// streamAfter is how long a call's output is held before it streams: a
// gate that answers sooner (most do) gets one answer file, as before; a
// slower one's output reaches its caller as it is written.
const streamAfter = 50 * time.Millisecond

// streamMax bounds what one call streams. The wrappers follow a stream
// with the shell's read, which in dash takes a system call per byte (1 MiB
// took about a quarter of a second): streaming is for the first lines of
// a slow gate; bulk output past this goes with the answer, which the
// wrapper prints with cat.
const streamMax = 64 << 10

// streamer takes a gate's output for the mailbox server. It buffers it
// until streamAfter has passed, then (for a v2 caller) writes what it
// holds and everything after to responses/<id>.stream, waking the caller
// after each write. Output a stream cannot carry (not ASCII text, past
// streamMax, or past max_session_bytes) ends streaming: it and all that follows is held for
// the answer, after what was streamed, so the caller still gets every byte
// in order per stream.
type streamer struct {
	s       *server
	dir     *callDir
	id      string
	mu      sync.Mutex
	chunks  []chunk // held, in the order written
	st      *stream
	held    bool // streaming ended: hold the rest
	done    bool
	timer   *time.Timer
	errText string
}

type chunk struct {
	stderr bool
	data   []byte
}

// newStreamer starts the streamAfter timer for a v2 call (v1 clients do
// not read streams: their output is held for the answer).
func newStreamer(s *server, dir *callDir, id string, version int) *streamer {
	st := &streamer{s: s, dir: dir, id: id}
	if version >= 2 {
		st.timer = time.AfterFunc(streamAfter, st.begin)
	}
	return st
}

type streamWriter struct {
	st     *streamer
	stderr bool
}

func (w streamWriter) Write(p []byte) (int, error) {
	w.st.write(w.stderr, p)
	return len(p), nil
}

func (st *streamer) stdout() streamWriter { return streamWriter{st, false} }
func (st *streamer) stderr() streamWriter { return streamWriter{st, true} }

func (st *streamer) write(stderr bool, p []byte) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.done {
		return // written after the gate returned: too late for its answer
	}
	if st.st != nil && !st.held && st.append(stderr, p) {
		st.dir.wake()
		return
	}
	st.chunks = append(st.chunks, chunk{stderr, append([]byte(nil), p...)})
}

// begin opens the stream and writes what was held.
func (st *streamer) begin() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.done || st.st != nil {
		return
	}
	s, err := st.s.box.openStream(st.id)
	if err != nil {
		st.held, st.errText = true, err.Error()
		return
	}
	st.st = s
	rest := st.chunks[:0]
	for _, c := range st.chunks {
		if st.held || !st.append(c.stderr, c.data) {
			rest = append(rest, c)
		}
	}
	st.chunks = rest
	st.dir.wake()
}

// append writes p to the stream when it can; false means streaming has
// ended and p is to be held. st.mu is held.
func (st *streamer) append(stderr bool, p []byte) bool {
	if !mailbox.Streamable(p) {
		st.held = true
		return false
	}
	lines := mailbox.StreamLines(stderr, p)
	if st.st.size()+int64(len(lines)) > streamMax || !st.s.reserve(st.id, st.st.size()+int64(len(lines))) {
		st.held = true
		return false
	}
	if err := st.st.write(lines); err != nil {
		st.held, st.errText = true, err.Error()
		return false
	}
	return true
}

// finish stops streaming and returns what is left for the answer and how
// many bytes the stream file holds.
func (st *streamer) finish() (stdout, stderr []byte, streamed int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.done = true
	if st.timer != nil {
		st.timer.Stop()
	}
	if st.st != nil {
		streamed = st.st.size()
		st.st.close()
	}
	for _, c := range st.chunks {
		if c.stderr {
			stderr = append(stderr, c.data...)
		} else {
			stdout = append(stdout, c.data...)
		}
	}
	st.chunks = nil
	return stdout, stderr, streamed
}
