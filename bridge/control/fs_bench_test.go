package control

import (
	"bytes"
	"testing"
)

// go test -run '^$' -bench FS -benchtime 20x ./bridge/control
func BenchmarkFSWriteFrom4MiB(b *testing.B) {
	f, err := NewFS(FSOptions{Workspace: b.TempDir(), Writable: true, MaxFileBytes: 8 << 20})
	if err != nil {
		b.Fatal(err)
	}
	data := bytes.Repeat([]byte("x"), 4<<20)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := f.WriteFrom("a/f.bin", bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFSRead1MiBChunks(b *testing.B) {
	f, err := NewFS(FSOptions{Workspace: b.TempDir(), Writable: true, MaxFileBytes: 8 << 20})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.WriteFrom("f.bin", bytes.NewReader(make([]byte, 4<<20))); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(4 << 20)
	for b.Loop() {
		for off := int64(0); ; {
			c, err := f.Read("f.bin", off, 0)
			if err != nil {
				b.Fatal(err)
			}
			off += int64(len(c.Data))
			if c.EOF {
				break
			}
		}
	}
}
