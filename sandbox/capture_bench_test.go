package sandbox

import (
	"bytes"
	"testing"
)

// BenchmarkCaptureWrite measures Capture.Write for small writes (a shell
// printing lines) and large ones, below and past the cap (the tail ring).
//
//	go test ./sandbox -run '^$' -bench Capture -benchmem
func BenchmarkCaptureWrite(b *testing.B) {
	for _, bc := range []struct {
		name string
		size int
		max  int64
	}{
		{"line-under-cap", 64, 1 << 30},
		{"line-past-cap", 64, 1 << 12},
		{"32KiB-under-cap", 32 << 10, 1 << 30},
		{"32KiB-past-cap", 32 << 10, 1 << 16},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := bytes.Repeat([]byte("x"), bc.size)
			c := NewCapture(bc.max)
			b.SetBytes(int64(bc.size))
			b.ReportAllocs()
			for b.Loop() {
				c.Write(p)
			}
		})
	}
}
