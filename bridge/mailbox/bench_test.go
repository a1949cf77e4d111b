package mailbox

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkReadCall measures reading one ready call (gate, two args) with
// the fd-relative, capped reads, in each layout version.
//
//	go test ./bridge/mailbox -run '^$' -bench . -benchmem
func BenchmarkReadCall(b *testing.B) {
	for _, v := range []int{1, 2} {
		b.Run("v"+strconv.Itoa(v), func(b *testing.B) {
			dir := b.TempDir()
			cd := filepath.Join(dir, "call")
			os.Mkdir(cd, 0o755)
			if v == 1 {
				os.MkdirAll(filepath.Join(cd, DirArgs), 0o755)
				os.WriteFile(filepath.Join(cd, DirArgs, "0"), []byte("hello"), 0o644)
				os.WriteFile(filepath.Join(cd, DirArgs, "1"), []byte("world"), 0o644)
				os.WriteFile(filepath.Join(cd, FileGate), []byte("t_echo"), 0o644)
			} else {
				os.WriteFile(filepath.Join(cd, FileArgv), []byte("/workspace\x00t_echo\x00hello\x00world\x00"), 0o644)
			}
			box, err := Open(Layout{Calls: dir, Responses: dir})
			if err != nil {
				b.Fatal(err)
			}
			defer box.Close()
			c, err := box.OpenCall("call")
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.ReportAllocs()
			for b.Loop() {
				call, err := c.Read(Limits{MaxArgs: 100, MaxArgBytes: 1 << 20, MaxStdinBytes: 1 << 20})
				if err != nil || len(call.Args) != 2 || call.Version != v {
					b.Fatal(err, call)
				}
			}
		})
	}
}

// BenchmarkRespond measures writing a small answer: v2 (one exit file,
// output inline) against v1 (stdout and exit files).
func BenchmarkRespond(b *testing.B) {
	for _, v := range []int{1, 2} {
		b.Run("v"+strconv.Itoa(v), func(b *testing.B) {
			dir := b.TempDir()
			box, err := Open(Layout{Calls: dir, Responses: dir})
			if err != nil {
				b.Fatal(err)
			}
			defer box.Close()
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				n++
				if err := box.Respond("r"+strconv.Itoa(n), v, Answer{Stdout: []byte("hello\n")}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
