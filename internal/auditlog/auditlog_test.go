package auditlog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The audit log grew to 1.6 GB under a flood. It rotates at max_bytes and
// keeps max_files old files, so it is bounded.
func TestAuditRotation(t *testing.T) {
	p := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := Open(p, 1000, 2)
	if err != nil {
		t.Fatal(err)
	}
	line := []byte(strings.Repeat("x", 99) + "\n")
	for range 100 { // 10,000 bytes
		if _, err := a.Write(line); err != nil {
			t.Fatal(err)
		}
	}
	a.Close()
	files, _ := filepath.Glob(p + "*")
	if len(files) != 3 {
		t.Errorf("files %v, want the log and 2 rotated", files)
	}
	for _, f := range files {
		fi, _ := os.Stat(f)
		if fi.Size() > 1000 || fi.Size()%100 != 0 {
			t.Errorf("%s: %d bytes (max 1000, whole lines)", f, fi.Size())
		}
	}
}

// A symlink planted at the audit path is refused, not followed.
func TestAuditSymlinkRefused(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "victim")
	os.WriteFile(target, []byte("keep"), 0o644)
	p := filepath.Join(dir, "audit.jsonl")
	os.Symlink(target, p)
	if _, err := Open(p, 0, 0); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("err %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err == nil {
		if _, err := Open(fifo, 0, 0); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("fifo: err %v", err)
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("victim is %q", b)
	}
}

// Two gatebridge processes sharing one audit log (two opens of the path,
// each with its own flock) rotate it without growing it past the bound or
// tearing a line.
func TestAuditRotationShared(t *testing.T) {
	p := filepath.Join(t.TempDir(), "audit.jsonl")
	var logs []*Log
	for range 2 {
		a, err := Open(p, 1000, 2)
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, a)
	}
	line := []byte(strings.Repeat("y", 99) + "\n")
	done := make(chan error, len(logs))
	for _, a := range logs {
		go func() {
			for range 300 {
				if _, err := a.Write(line); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range logs {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range logs {
		a.Close()
	}
	files, _ := filepath.Glob(p + "*")
	if len(files) > 3 {
		t.Errorf("files %v, want at most the log and 2 rotated", files)
	}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if len(b) > 1000 || len(b)%100 != 0 || strings.Trim(string(b), "y\n") != "" {
			t.Errorf("%s: %d bytes (max 1000, whole lines)", f, len(b))
		}
	}
}
