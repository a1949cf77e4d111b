package gates

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// go test -run '^$' -bench ReadFile -benchtime 2000x ./gates
//
// ThisProcess reads as this process; AsOwner (root only) as the owner of
// a workspace someone else owns, on a thread of its own per call.
func BenchmarkReadFile(b *testing.B) {
	for _, tc := range []struct {
		name string
		uid  int
	}{{"ThisProcess", -1}, {"AsOwner", 4242}} {
		b.Run(tc.name, func(b *testing.B) {
			if tc.uid >= 0 && os.Geteuid() != 0 {
				b.Skip("needs root: the gates change their identity only as root")
			}
			ws := b.TempDir()
			if err := os.WriteFile(filepath.Join(ws, "f.txt"), bytes.Repeat([]byte("line\n"), 800), 0o644); err != nil {
				b.Fatal(err)
			}
			if tc.uid >= 0 {
				if err := os.Chown(ws, tc.uid, tc.uid); err != nil {
					b.Fatal(err)
				}
			}
			gs, err := Builtins(Options{Root: ws})
			if err != nil {
				b.Fatal(err)
			}
			var g Gate
			for _, x := range gs {
				if x.Spec().Name == "read_file" {
					g = x
				}
			}
			c := &Call{SessionID: "s", ID: "c", Args: []string{"f.txt"}, Stdout: io.Discard, Stderr: io.Discard}
			for b.Loop() {
				if code, err := g.Call(context.Background(), c); code != 0 || err != nil {
					b.Fatal(code, err)
				}
			}
		})
	}
}
