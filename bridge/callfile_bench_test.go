package bridge

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
)

// BenchmarkReadCall measures reading one ready call (gate, two args) with
// the fd-relative, capped reads, in each layout version.
//
//	go test ./bridge -run '^$' -bench . -benchmem
func BenchmarkReadCall(b *testing.B) {
	for _, v := range []int{1, 2} {
		b.Run("v"+strconv.Itoa(v), func(b *testing.B) {
			dir := b.TempDir()
			cd := filepath.Join(dir, "call")
			os.Mkdir(cd, 0o755)
			if v == 1 {
				os.MkdirAll(filepath.Join(cd, mailbox.DirArgs), 0o755)
				os.WriteFile(filepath.Join(cd, mailbox.DirArgs, "0"), []byte("hello"), 0o644)
				os.WriteFile(filepath.Join(cd, mailbox.DirArgs, "1"), []byte("world"), 0o644)
				os.WriteFile(filepath.Join(cd, mailbox.FileGate), []byte("t_echo"), 0o644)
			} else {
				os.WriteFile(filepath.Join(cd, mailbox.FileArgv), []byte("/workspace\x00t_echo\x00hello\x00world\x00"), 0o644)
			}
			box, err := openBox(mailbox.Layout{Calls: dir, Responses: dir})
			if err != nil {
				b.Fatal(err)
			}
			defer box.close()
			c, err := box.openCall("call")
			if err != nil {
				b.Fatal(err)
			}
			defer c.close()
			b.ReportAllocs()
			for b.Loop() {
				call, err := c.read(mailbox.Limits{MaxArgs: 100, MaxArgBytes: 1 << 20, MaxStdinBytes: 1 << 20})
				if err != nil || len(call.args) != 2 || call.version != v {
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
			box, err := openBox(mailbox.Layout{Calls: dir, Responses: dir})
			if err != nil {
				b.Fatal(err)
			}
			defer box.close()
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				n++
				if err := box.respond("r"+strconv.Itoa(n), v, mailbox.Answer{Stdout: []byte("hello\n")}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
