package main

import (
	"golang.org/x/sys/unix"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The audit log grew to 1.6 GB under a flood. It rotates at max_bytes and
// keeps max_files old files, so it is bounded.
func TestAuditRotation(t *testing.T) {
	p := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := openAudit(p, 1000, 2)
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
	if _, err := openAudit(p, 0, 0); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("err %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err == nil {
		if _, err := openAudit(fifo, 0, 0); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("fifo: err %v", err)
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("victim is %q", b)
	}
}
