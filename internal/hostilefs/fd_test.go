//go:build unix

package hostilefs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func openFd(t *testing.T, dir string) int {
	t.Helper()
	fd, err := OpenDirNoFollow(dir)
	must(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// TestReadFileAtRefuses plants what a sandbox can leave where the host
// reads a file: each is refused, named, without blocking on the FIFO and
// without the secret a link reaches.
func TestReadFileAtRefuses(t *testing.T) {
	host := t.TempDir()
	secret := filepath.Join(host, "secret")
	must(t, os.WriteFile(secret, []byte("SECRET"), 0o600))
	dir := t.TempDir()
	must(t, os.Symlink(secret, filepath.Join(dir, "link")))
	must(t, os.Link(secret, filepath.Join(dir, "hard")))
	must(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
	must(t, os.Mkdir(filepath.Join(dir, "dir"), 0o700))
	must(t, os.WriteFile(filepath.Join(dir, "big"), make([]byte, 11), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "ok"), []byte("0123456789"), 0o600))
	fd := openFd(t, dir)
	for name, want := range map[string]string{
		"link": "link is a symbolic link (refused)",
		"hard": "hard has more than one hard link (refused)",
		"fifo": "fifo is not a regular file (refused)",
		"dir":  "dir is not a regular file (refused)",
		"big":  "big exceeds the size limit (11 bytes, limit 10)",
	} {
		done := make(chan struct{})
		var b []byte
		var err error
		go func() { b, err = ReadFileAt(fd, name, 10); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("ReadFileAt(%s) blocked", name)
		}
		var fe *FileError
		if err == nil || err.Error() != want || !errors.As(err, &fe) || fe.Name != name {
			t.Errorf("ReadFileAt(%s) = %q, %v; want the error %q", name, b, err, want)
		}
		if (name != "big") != Refused(err) {
			t.Errorf("Refused(%v) = %v", err, Refused(err))
		}
	}
	if b, err := ReadFileAt(fd, "ok", 10); err != nil || string(b) != "0123456789" {
		t.Errorf("ReadFileAt(ok) = %q, %v", b, err)
	}
	if _, err := ReadFileAt(fd, "missing", 10); !errors.Is(err, unix.ENOENT) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadFileAt(missing) = %v, want ENOENT", err)
	}
	if _, err := OpenDirAt(fd, "link"); !errors.Is(err, ErrSymlink) {
		t.Errorf("OpenDirAt(link) = %v, want ErrSymlink", err)
	}
	if _, err := OpenDirAt(fd, "ok"); !errors.Is(err, ErrNotDir) {
		t.Errorf("OpenDirAt(ok) = %v, want ErrNotDir", err)
	}
}

// TestWriteFileAtReplacesLink: a link planted at the name is replaced,
// not written through; no temp file stays.
func TestWriteFileAtReplacesLink(t *testing.T) {
	host := t.TempDir()
	target := filepath.Join(host, "target")
	must(t, os.WriteFile(target, []byte("keep"), 0o600))
	dir := t.TempDir()
	must(t, os.Symlink(target, filepath.Join(dir, "x.exit")))
	fd := openFd(t, dir)
	must(t, WriteFileAt(fd, "x.exit", []byte("0\n"), 0o644))
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Fatalf("written through the link: %q", b)
	}
	fi, err := os.Lstat(filepath.Join(dir, "x.exit"))
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
		t.Fatalf("x.exit: %v, %v", fi, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("left behind: %v", ents)
	}
}

// TestMkdirOpenAtSwapped: the directory just made is swapped for a link
// to a host directory before it is opened (what a sandbox that writes the
// parent can do): the link is refused, not followed, and the host
// directory keeps its mode.
func TestMkdirOpenAtSwapped(t *testing.T) {
	victim := t.TempDir()
	must(t, os.Chmod(victim, 0o755))
	dir := t.TempDir()
	fd := openFd(t, dir)
	testHookAfterMkdir = func(name string) {
		p := filepath.Join(dir, name)
		must(t, os.Rename(p, p+".moved"))
		must(t, os.Symlink(victim, p))
	}
	defer func() { testHookAfterMkdir = nil }()
	if nfd, err := MkdirOpenAt(fd, "s", 0o700); err == nil || !errors.Is(err, ErrSymlink) {
		unix.Close(nfd)
		t.Fatalf("MkdirOpenAt over a swapped-in link: %v, want ErrSymlink", err)
	}
	if fi, _ := os.Stat(victim); fi.Mode().Perm() != 0o755 {
		t.Fatalf("the host directory's mode changed to %v", fi.Mode().Perm())
	}
	testHookAfterMkdir = func(name string) {
		p := filepath.Join(dir, name)
		must(t, os.Remove(p))
		must(t, os.MkdirAll(filepath.Join(p, "planted"), 0o777))
	}
	if nfd, err := MkdirOpenAt(fd, "t", 0o700); err == nil || !strings.Contains(err.Error(), "replaced") {
		unix.Close(nfd)
		t.Fatalf("MkdirOpenAt over a swapped-in directory: %v", err)
	}
	testHookAfterMkdir = nil
	if _, err := MkdirOpenAt(fd, "s", 0o700); !errors.Is(err, unix.EEXIST) {
		t.Fatalf("MkdirOpenAt over an entry: %v, want EEXIST", err)
	}
	syscall.Umask(0o077)
	nfd, err := MkdirOpenAt(fd, "u", 0o711)
	syscall.Umask(0o022)
	must(t, err)
	unix.Close(nfd)
	if fi, _ := os.Lstat(filepath.Join(dir, "u")); fi.Mode().Perm() != 0o711 {
		t.Fatalf("mode %v, want 0711 whatever the umask", fi.Mode().Perm())
	}
}

// TestWakeFIFO: WakeAt writes a byte to a FIFO with a reader, says
// nothing without one or without a FIFO, and refuses anything else;
// HasReader tells which.
func TestWakeFIFO(t *testing.T) {
	if !CanMkfifoAt {
		t.Skip("no mkfifoat here")
	}
	dir := t.TempDir()
	fd := openFd(t, dir)
	if err := WakeAt(fd, "wake"); err != nil {
		t.Fatalf("no FIFO: %v", err)
	}
	if _, known := HasReader(fd, "wake"); known {
		t.Fatal("HasReader knows of a missing FIFO")
	}
	must(t, MkfifoAt(fd, "wake"))
	if r, known := HasReader(fd, "wake"); r || !known {
		t.Fatalf("HasReader without a reader: %v, %v", r, known)
	}
	must(t, WakeAt(fd, "wake"))
	f, err := os.OpenFile(filepath.Join(dir, "wake"), os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	if r, known := HasReader(fd, "wake"); !r || !known {
		t.Fatalf("HasReader with a reader: %v, %v", r, known)
	}
	must(t, WakeAt(fd, "wake"))
	b := make([]byte, 4)
	if n, err := f.Read(b); n != 1 || err != nil {
		t.Fatalf("read %d, %v", n, err)
	}
	must(t, os.WriteFile(filepath.Join(dir, "file"), nil, 0o600))
	if err := WakeAt(fd, "file"); err == nil || err.Error() != "file is not a FIFO (refused)" {
		t.Fatalf("WakeAt on a file: %v", err)
	}
	MkfifoForOwnerAt(fd, "w2")
	if st, err := StatAt(fd, "w2"); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		t.Fatalf("MkfifoForOwnerAt: %v", err)
	}
}
