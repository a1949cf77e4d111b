package wrappers

import (
	"os"
	"strconv"
	"testing"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
)

// BenchmarkScript measures generating one wrapper (done for every gate at
// session start).
//
//	go test ./wrappers -run '^$' -bench . -benchmem
func BenchmarkScript(b *testing.B) {
	s := Spec{Name: "read_file", Summary: "Read a file under the workspace root; prints it with line numbers.", Stdin: mailbox.StdinIfNoArgs}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Script(s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteDir measures writing the wrappers of a typical gate set
// (seven gates) into a fresh bin/ directory: replace, WriteDir (a temp
// file renamed into place per wrapper, as when the gates change during a
// session); create, CreateDir (as a session start does).
func BenchmarkWriteDir(b *testing.B) {
	specs := []Spec{
		{Name: "read_file", Stdin: mailbox.StdinNone}, {Name: "list_dir"}, {Name: "search"},
		{Name: "write_file", Stdin: mailbox.StdinAlways}, {Name: "submit", Stdin: mailbox.StdinIfNoArgs},
		{Name: "gb_echo", Stdin: mailbox.StdinIfNoArgs}, {Name: "run_tests"},
	}
	for _, c := range []struct {
		name  string
		write func(string, []Spec) error
	}{{"replace", WriteDir}, {"create", CreateDir}} {
		b.Run(c.name, func(b *testing.B) {
			root := b.TempDir()
			n := 0
			for b.Loop() {
				n++
				dir := root + "/" + string(rune('a'+n%26)) + itoa(n)
				if err := mkdir(dir); err != nil {
					b.Fatal(err)
				}
				if err := c.write(dir, specs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func mkdir(d string) error { return os.Mkdir(d, 0o755) }
