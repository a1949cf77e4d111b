package sandbox

import (
	"fmt"
	"sync"
)

// Capture keeps the first and last bytes written to it, up to a total cap,
// and counts what it dropped from the middle. It is safe for concurrent use.
type Capture struct {
	mu      sync.Mutex
	max     int64
	head    []byte
	tail    []byte // ring buffer of the last max-len(head) bytes
	tailPos int
	tailLen int
	total   int64
}

// NewCapture returns a Capture that keeps at most max bytes: max/2 from the
// head and max/2 from the tail. max <= 0 means [DefaultMaxOutput].
func NewCapture(max int64) *Capture {
	if max <= 0 {
		max = DefaultMaxOutput
	}
	return &Capture{max: max}
}

// Write implements io.Writer; it never fails.
func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	c.total += int64(n)
	headCap := int(c.max / 2)
	if len(c.head) < headCap {
		k := min(headCap-len(c.head), len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	tailCap := int(c.max) - headCap
	if tailCap <= 0 || len(p) == 0 {
		return n, nil
	}
	if c.tail == nil {
		c.tail = make([]byte, 0, min(tailCap, 64<<10))
	}
	for len(p) > 0 {
		if len(c.tail) < tailCap {
			k := min(tailCap-len(c.tail), len(p))
			c.tail = append(c.tail, p[:k]...)
			p = p[k:]
			c.tailLen = len(c.tail)
			continue
		}
		// ring is full: overwrite from tailPos
		k := copy(c.tail[c.tailPos:], p)
		p = p[k:]
		c.tailPos = (c.tailPos + k) % tailCap
	}
	return n, nil
}

// Dropped returns how many bytes were cut from the middle.
func (c *Capture) Dropped() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total - int64(len(c.head)) - int64(c.tailLen)
}

// Total returns how many bytes were written.
func (c *Capture) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// Bytes returns head + tail. When bytes were dropped, a marker line
// "\n[gatebridge: N bytes dropped]\n" separates them.
func (c *Capture) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	dropped := c.total - int64(len(c.head)) - int64(c.tailLen)
	out := make([]byte, 0, len(c.head)+c.tailLen+64)
	out = append(out, c.head...)
	if dropped > 0 {
		out = append(out, fmt.Sprintf("\n[gatebridge: %d bytes dropped]\n", dropped)...)
	}
	if len(c.tail) == c.tailLen && c.tailPos > 0 {
		out = append(out, c.tail[c.tailPos:]...)
		out = append(out, c.tail[:c.tailPos]...)
	} else {
		out = append(out, c.tail...)
	}
	return out
}
