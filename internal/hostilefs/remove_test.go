//go:build unix

package hostilefs

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestRemoveTreeFollowsNoLink plants what a sandboxed command can leave in
// its session: links to a host directory and to a host file (at the top
// and deep down), an empty directory, a directory it made unreadable, and
// a FIFO. RemoveTree removes all of it and nothing the links point to.
func TestRemoveTreeFollowsNoLink(t *testing.T) {
	host := t.TempDir()
	secret := filepath.Join(host, "secret")
	if err := os.WriteFile(secret, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "session")
	for _, d := range []string{"calls/a/b", "tmp/empty", "tmp/locked/inner"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"calls/dirlink":       host,
		"calls/a/b/dir":       host,
		"calls/a/filelink":    secret,
		"tmp/locked/inner/up": "../../../..",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(root, "calls/a/fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "tmp/locked"), 0); err != nil {
		t.Fatal(err)
	}
	if err := RemoveTree(root); err != nil {
		t.Fatalf("RemoveTree: %v", err)
	}
	if _, err := os.Lstat(root); !os.IsNotExist(err) {
		t.Errorf("the tree is still there: %v", err)
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "keep" {
		t.Fatalf("the host file a link pointed to: %q, %v", b, err)
	}
	if ents, err := os.ReadDir(host); err != nil || len(ents) != 1 {
		t.Fatalf("the host directory a link pointed to: %v, %v", ents, err)
	}
}
