package wrappers

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
)

// CreateDir writes each wrapper once at its final name, and is meant for a
// new, empty bin/. Anything already at a wrapper's name (a link planted
// to a host file, or a dangling one, which O_CREAT alone would follow and
// create) makes it fail without writing through it.
func TestCreateDirFollowsNoLink(t *testing.T) {
	host := t.TempDir()
	target := filepath.Join(host, "victim")
	if err := os.WriteFile(target, []byte("host data\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, dest := range map[string]string{"existing": target, "dangling": filepath.Join(host, "created")} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Symlink(dest, filepath.Join(dir, "probe")); err != nil {
				t.Fatal(err)
			}
			if err := CreateDir(dir, []Spec{{Name: "probe"}}); err == nil {
				t.Fatal("CreateDir wrote over a link")
			}
			if b, _ := os.ReadFile(target); string(b) != "host data\n" {
				t.Errorf("the link's target now holds %q", b)
			}
			if _, err := os.Lstat(filepath.Join(host, "created")); err == nil {
				t.Error("CreateDir created the dangling link's target")
			}
		})
	}
}

// The wrappers CreateDir writes are the scripts WriteDir writes, mode 0755
// whatever the umask (a sandbox user other than gatebridge's runs them).
func TestCreateDirWritesScripts(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	specs := []Spec{{Name: "a"}, {Name: "b", Summary: "bee", Stdin: mailbox.StdinAlways}}
	created, replaced := t.TempDir(), t.TempDir()
	if err := CreateDir(created, specs); err != nil {
		t.Fatal(err)
	}
	if err := WriteDir(replaced, specs); err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		want, _ := os.ReadFile(filepath.Join(replaced, s.Name))
		got, err := os.ReadFile(filepath.Join(created, s.Name))
		if err != nil || !bytes.Equal(got, want) || len(got) == 0 {
			t.Errorf("%s: %v; CreateDir's script differs from WriteDir's", s.Name, err)
		}
		fi, err := os.Stat(filepath.Join(created, s.Name))
		if err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: mode %v, %v; want 0755", s.Name, fi.Mode(), err)
		}
	}
	if err := CreateDir(t.TempDir(), []Spec{{Name: "x"}, {Name: "x"}}); err == nil {
		t.Error("a gate name twice was accepted")
	}
}

// The scripts CreateDir and WriteDir write come from a cache keyed by the
// whole Spec: a gate whose summary or stdin mode changed gets its new
// script, not the one made before.
func TestScriptCacheKeysOnWholeSpec(t *testing.T) {
	specs := []Spec{
		{Name: "cached", Summary: "first"},
		{Name: "cached", Summary: "second"},
		{Name: "cached", Summary: "second", Stdin: mailbox.StdinAlways},
	}
	for _, s := range specs {
		for range 2 { // the second time from the cache
			dir := t.TempDir()
			if err := CreateDir(dir, []Spec{s}); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(filepath.Join(dir, s.Name))
			want, err := Script(s)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%+v: CreateDir wrote another script than Script makes (%v)", s, err)
			}
		}
	}
}
