//go:build unix

package hostilefs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func openTmp(t *testing.T) (string, *Dir) {
	t.Helper()
	dir := t.TempDir()
	d, err := OpenDir(dir)
	must(t, err)
	t.Cleanup(func() { d.Close() })
	return dir, d
}

// TestWalkFollowsNoLink: a symlink anywhere on the way is refused, even
// one that stays inside; a file on the way is not a directory; nothing
// climbs up.
func TestWalkFollowsNoLink(t *testing.T) {
	dir, d := openTmp(t)
	must(t, os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755))
	must(t, os.Symlink("a", filepath.Join(dir, "in")))
	must(t, os.Symlink("/", filepath.Join(dir, "a", "out")))
	must(t, os.WriteFile(filepath.Join(dir, "f"), nil, 0o644))
	must(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	for rel, want := range map[string]error{
		"in": ErrSymlink, "in/b": ErrSymlink, "a/out": ErrSymlink, "a/out/etc": ErrSymlink,
		"f": ErrNotDir, "f/x": ErrNotDir, "fifo": ErrNotDir,
		"a/../a": ErrBadPath, "..": ErrBadPath, "/a": ErrBadPath, "a//b": ErrBadPath, "": ErrBadPath, "a/": ErrBadPath,
		"missing": fs.ErrNotExist,
	} {
		sub, err := d.Walk(rel, WalkOptions{})
		if err == nil {
			sub.Close()
		}
		var pe *fs.PathError
		if !errors.Is(err, want) || !errors.As(err, &pe) {
			t.Errorf("Walk(%q): %v, want %v in a PathError", rel, err, want)
		}
	}
	sub, err := d.Walk("a/b", WalkOptions{})
	must(t, err)
	sub.Close()
	if _, err := os.Stat(filepath.Join(dir, "missing")); err == nil {
		t.Error("a walk without Create made a directory")
	}
}

// TestWalkChecksBeforeOpen: Check sees every component's path before the
// walk opens it, so a symlink swapped in right after the check is
// refused, not followed; a refusal stops the walk before anything is made.
func TestWalkChecksBeforeOpen(t *testing.T) {
	dir, d := openTmp(t)
	must(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	must(t, os.Mkdir(filepath.Join(dir, "target"), 0o755))
	var seen []string
	_, err := d.Walk("sub/x", WalkOptions{Create: true, Perm: 0o755, Check: func(rel string) error {
		seen = append(seen, rel)
		if rel == "sub" {
			must(t, os.Rename(filepath.Join(dir, "sub"), filepath.Join(dir, "moved")))
			must(t, os.Symlink("target", filepath.Join(dir, "sub")))
		}
		return nil
	}})
	if !errors.Is(err, ErrSymlink) {
		t.Fatalf("walk through a symlink swapped in after the check: %v", err)
	}
	if strings.Join(seen, ",") != "sub" {
		t.Errorf("checked %q", seen)
	}
	if _, err := os.Stat(filepath.Join(dir, "target", "x")); err == nil {
		t.Error("x was made through the link")
	}
	stop := errors.New("refused")
	_, err = d.Walk("new/deeper", WalkOptions{Create: true, Perm: 0o755, Check: func(rel string) error {
		if rel == "new/deeper" {
			return stop
		}
		return nil
	}})
	if err != stop {
		t.Fatalf("check's error not returned as is: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "new", "deeper")); err == nil {
		t.Error("deeper was made although its check failed")
	}
}

// TestWriteAtomicOpenedDir: the file is written into the directory the
// walk opened, even after that directory was moved and a symlink took
// its name; a symlink at the file's name is replaced, not followed.
func TestWriteAtomicOpenedDir(t *testing.T) {
	dir, d := openTmp(t)
	must(t, os.Mkdir(filepath.Join(dir, "protected"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "protected", "config"), []byte("keep"), 0o644))
	sub, err := d.Walk("a/b", WalkOptions{Create: true, Perm: 0o755})
	must(t, err)
	defer sub.Close()
	must(t, os.Rename(filepath.Join(dir, "a", "b"), filepath.Join(dir, "a", "real")))
	must(t, os.Symlink("../protected", filepath.Join(dir, "a", "b")))
	must(t, sub.WriteFileAtomic("config", []byte("new"), WriteOptions{Perm: 0o600, ExactPerm: true, Sync: true}))
	if b, _ := os.ReadFile(filepath.Join(dir, "protected", "config")); string(b) != "keep" {
		t.Errorf("written through the link: %q", b)
	}
	fi, err := os.Stat(filepath.Join(dir, "a", "real", "config"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("not in the opened directory, or wrong mode: %v %v", fi, err)
	}
	must(t, os.Symlink("../../protected/config", filepath.Join(dir, "a", "real", "link")))
	must(t, sub.WriteFileAtomic("link", []byte("new"), WriteOptions{Perm: 0o644}))
	if b, _ := os.ReadFile(filepath.Join(dir, "protected", "config")); string(b) != "keep" {
		t.Errorf("written through the final link: %q", b)
	}
	if fi, _ := os.Lstat(filepath.Join(dir, "a", "real", "link")); !fi.Mode().IsRegular() {
		t.Errorf("link not replaced: %v", fi.Mode())
	}
	must(t, os.Mkdir(filepath.Join(dir, "a", "real", "adir"), 0o755))
	if err := sub.WriteFileAtomic("adir", []byte("x"), WriteOptions{Perm: 0o644}); err == nil {
		t.Error("a directory was replaced")
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "a", "real"))
	for _, e := range ents {
		if strings.Contains(e.Name(), ".gb-tmp-") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
	if err := sub.WriteFileAtomic("../x", nil, WriteOptions{}); !errors.Is(err, ErrBadPath) {
		t.Errorf("a name with a slash: %v", err)
	}
	long := strings.Repeat("n", 255)
	must(t, sub.WriteFileAtomic(long, []byte("x"), WriteOptions{Perm: 0o644}))
}

// TestOwner (as root): what a walk makes and what WriteFileAtomic writes
// belong to the owner given, with the group of a setgid parent kept; a
// directory that was already there keeps its owner.
func TestOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files away")
	}
	dir, d := openTmp(t)
	must(t, os.Mkdir(filepath.Join(dir, "old"), 0o755))
	must(t, os.Chown(filepath.Join(dir, "old"), 4243, 4243))
	owner := &Owner{UID: 4242, GID: 4242}
	sub, err := d.Walk("old/new/deeper", WalkOptions{Create: true, Perm: 0o755, Owner: owner})
	must(t, err)
	must(t, sub.WriteFileAtomic("f", []byte("x"), WriteOptions{Perm: 0o644, Owner: owner}))
	sub.Close()
	must(t, os.Mkdir(filepath.Join(dir, "sgid"), 0o755))
	must(t, os.Chown(filepath.Join(dir, "sgid"), 0, 777))
	must(t, os.Chmod(filepath.Join(dir, "sgid"), os.ModeSetgid|0o775))
	sub, err = d.Walk("sgid/n", WalkOptions{Create: true, Perm: 0o755, Owner: owner})
	must(t, err)
	sub.Close()
	for rel, want := range map[string][2]uint32{
		"old": {4243, 4243}, "old/new": {4242, 4242}, "old/new/deeper": {4242, 4242},
		"old/new/deeper/f": {4242, 4242}, "sgid/n": {4242, 777},
	} {
		fi, err := os.Lstat(filepath.Join(dir, rel))
		must(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != want[0] || st.Gid != want[1] {
			t.Errorf("%s: %d:%d, want %d:%d", rel, st.Uid, st.Gid, want[0], want[1])
		}
	}
}

// TestOwnerNotGivenToSwapped (as root): between the mkdir and the open of
// a directory the walk makes, the sandbox renames a root-owned directory
// it cannot write (vendor/, with content) over the new empty one. The walk
// must not give that directory to the owner, which would let the sandbox
// write what it holds.
func TestOwnerNotGivenToSwapped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files away")
	}
	dir, d := openTmp(t)
	must(t, os.Mkdir(filepath.Join(dir, "vendor"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "vendor", "lib"), []byte("x"), 0o644))
	swapped := false
	testHookAfterMkdir = func(name string) {
		if name == "new" {
			// rename(2) replaces an empty directory (os.Rename refuses to).
			must(t, syscall.Rename(filepath.Join(dir, "vendor"), filepath.Join(dir, "new")))
			swapped = true
		}
	}
	defer func() { testHookAfterMkdir = nil }()
	sub, err := d.Walk("new", WalkOptions{Create: true, Perm: 0o755, Owner: &Owner{UID: 4242, GID: 4242}})
	must(t, err)
	sub.Close()
	if !swapped {
		t.Fatal("the hook did not run")
	}
	fi, err := os.Lstat(filepath.Join(dir, "new", "lib"))
	must(t, err)
	st, _ := os.Lstat(filepath.Join(dir, "new"))
	if s := st.Sys().(*syscall.Stat_t); s.Uid != 0 || s.Gid != 0 {
		t.Errorf("the swapped-in directory (holding %s) was given to %d:%d", fi.Name(), s.Uid, s.Gid)
	}
}

// TestExactPerm: directories a walk makes get exactly Perm whatever the
// umask, keeping the setgid bit of a setgid parent; one already there
// keeps its mode.
func TestExactPerm(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir, d := openTmp(t)
	must(t, os.Mkdir(filepath.Join(dir, "old"), 0o700))
	sub, err := d.Walk("old/new/deeper", WalkOptions{Create: true, Perm: 0o775, ExactPerm: true})
	must(t, err)
	sub.Close()
	must(t, os.Mkdir(filepath.Join(dir, "sgid"), 0o755))
	must(t, os.Chmod(filepath.Join(dir, "sgid"), os.ModeSetgid|0o775))
	sub, err = d.Walk("sgid/n", WalkOptions{Create: true, Perm: 0o770, ExactPerm: true})
	must(t, err)
	sub.Close()
	for rel, want := range map[string]fs.FileMode{
		"old": fs.ModeDir | 0o700, "old/new": fs.ModeDir | 0o775, "old/new/deeper": fs.ModeDir | 0o775,
		"sgid/n": fs.ModeDir | fs.ModeSetgid | 0o770,
	} {
		fi, err := os.Lstat(filepath.Join(dir, rel))
		must(t, err)
		if fi.Mode() != want {
			t.Errorf("%s: %v, want %v", rel, fi.Mode(), want)
		}
	}
}
