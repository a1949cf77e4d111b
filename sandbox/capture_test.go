package sandbox_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/gatebridge/gatebridge/sandbox"
)

// want is what a Capture of max bytes must return after in was written.
func want(in []byte, max int) ([]byte, int64) {
	if len(in) <= max {
		return in, 0
	}
	head, tail := in[:max/2], in[len(in)-(max-max/2):]
	dropped := len(in) - max
	out := append([]byte{}, head...)
	out = append(out, fmt.Sprintf("\n[gatebridge: %d bytes dropped]\n", dropped)...)
	return append(out, tail...), int64(dropped)
}

func TestCapture(t *testing.T) {
	for _, max := range []int{1, 2, 7, 10, 64, 1000} {
		for _, n := range []int{0, 1, max / 2, max - 1, max, max + 1, 3 * max, 10*max + 3} {
			in := make([]byte, n)
			for i := range in {
				in[i] = byte('a' + i%26)
			}
			for _, chunk := range []int{1, 3, max, n + 1} {
				t.Run(fmt.Sprintf("max%d/n%d/chunk%d", max, n, chunk), func(t *testing.T) {
					c := sandbox.NewCapture(int64(max))
					for p := in; len(p) > 0; {
						k := min(chunk, len(p))
						if w, err := c.Write(p[:k]); w != k || err != nil {
							t.Fatalf("Write = %d, %v", w, err)
						}
						p = p[k:]
					}
					wb, wd := want(in, max)
					if got := c.Bytes(); !bytes.Equal(got, wb) {
						t.Errorf("Bytes = %q, want %q", got, wb)
					}
					if c.Dropped() != wd || c.Total() != int64(n) {
						t.Errorf("Dropped %d Total %d, want %d %d", c.Dropped(), c.Total(), wd, n)
					}
				})
			}
		}
	}
}

func TestCaptureRandomWrites(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		max := 1 + r.IntN(300)
		c := sandbox.NewCapture(int64(max))
		var in []byte
		for range r.IntN(20) {
			p := make([]byte, r.IntN(2*max))
			for i := range p {
				p[i] = byte(r.IntN(256))
			}
			c.Write(p)
			in = append(in, p...)
			// Bytes in the middle of writing must not disturb the state.
			if r.IntN(3) == 0 {
				c.Bytes()
			}
		}
		wb, wd := want(in, max)
		if got := c.Bytes(); !bytes.Equal(got, wb) || c.Dropped() != wd {
			t.Fatalf("max %d, %d bytes in: Bytes/Dropped differ (%d vs %d)", max, len(in), c.Dropped(), wd)
		}
	}
}

func TestCaptureDefault(t *testing.T) {
	c := sandbox.NewCapture(0)
	c.Write(make([]byte, sandbox.DefaultMaxOutput+5))
	if c.Dropped() != 5 {
		t.Errorf("Dropped %d", c.Dropped())
	}
}

// Concurrent writers (stdout and stderr merged, say) lose no count and
// never interleave inside one Write.
func TestCaptureConcurrent(t *testing.T) {
	c := sandbox.NewCapture(1 << 20)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			line := bytes.Repeat([]byte{byte('a' + g)}, 99)
			line = append(line, '\n')
			for range 500 {
				c.Write(line)
				c.Dropped()
			}
		}()
	}
	wg.Wait()
	if c.Total() != 8*500*100 || c.Dropped() != 0 {
		t.Fatalf("Total %d Dropped %d", c.Total(), c.Dropped())
	}
	for _, l := range bytes.Split(bytes.TrimSuffix(c.Bytes(), []byte("\n")), []byte("\n")) {
		if len(l) != 99 || bytes.Count(l, l[:1]) != 99 {
			t.Fatalf("torn line %q", l)
		}
	}
}
