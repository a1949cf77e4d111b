package control

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatebridge/gatebridge/internal/hint"
)

// sandbox cp's two directions: a local file into the workspace and back
// out, to a directory (keeping the name) and to stdout; a directory is
// refused with a hint.
func TestCopyFile(t *testing.T) {
	ws, local := t.TempDir(), t.TempDir()
	f, err := NewFS(FSOptions{Workspace: ws, Inside: ws, Writable: true, MaxFileBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(local, "in.txt")
	os.WriteFile(src, []byte("hello\n"), 0o644)
	to, n, err := f.CopyFileIn(src, "copy.txt", nil)
	if err != nil || n != 6 || !strings.HasSuffix(to, "copy.txt") {
		t.Fatalf("in: %q %d %v", to, n, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "copy.txt")); string(b) != "hello\n" {
		t.Fatalf("workspace has %q", b)
	}
	outDir := filepath.Join(local, "out")
	os.Mkdir(outDir, 0o755)
	if to, _, err := f.CopyFileOut("copy.txt", outDir, nil); err != nil || to != filepath.Join(outDir, "copy.txt") {
		t.Fatalf("out: %q %v", to, err)
	}
	var stdout bytes.Buffer
	if to, n, err := f.CopyFileOut("copy.txt", "-", &stdout); err != nil || to != "" || n != 6 || stdout.String() != "hello\n" {
		t.Fatalf("out to stdout: %q %d %v %q", to, n, err, stdout.String())
	}
	if _, _, err := f.CopyFileIn(local, "d", nil); err == nil || !strings.Contains(err.Error(), "not a regular file") || hint.Of(err) == "" {
		t.Fatalf("a directory: %v", err)
	}
}
