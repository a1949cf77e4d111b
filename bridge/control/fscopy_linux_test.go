package control

import (
	"bytes"
	"os"
	"os/exec"
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

// sandbox cp NAME:x DST decided whether DST was a directory with a stat
// that followed a link there: a link planted at DST (to a directory the
// copier never named) got the file. A link at DST is now refused, and a
// link to a file is neither followed nor replaced.
func TestCopyFileOutLinkAtDst(t *testing.T) {
	ws, local := t.TempDir(), t.TempDir()
	f, err := NewFS(FSOptions{Workspace: ws, Writable: true})
	mustT(t, err)
	mustT(t, os.WriteFile(filepath.Join(ws, "f"), []byte("from the sandbox"), 0o644))
	target := filepath.Join(local, "target")
	mustT(t, os.Mkdir(target, 0o755))
	mustT(t, os.Symlink(target, filepath.Join(local, "out")))
	mustT(t, os.WriteFile(filepath.Join(local, "victim"), []byte("kept"), 0o644))
	mustT(t, os.Symlink("victim", filepath.Join(local, "lnk")))

	for _, dst := range []string{filepath.Join(local, "out"), filepath.Join(local, "lnk")} {
		if to, _, err := f.CopyFileOut("f", dst, nil); err == nil || !strings.Contains(err.Error(), "symbolic link") || hint.Of(err) == "" {
			t.Errorf("copy to the link %s: to %q, err %v", dst, to, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(target, "f")); err == nil {
		t.Error("the file went into the link's target directory")
	}
	if b, _ := os.ReadFile(filepath.Join(local, "victim")); string(b) != "kept" {
		t.Errorf("the link's target file is now %q", b)
	}
	if fi, err := os.Lstat(filepath.Join(local, "lnk")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", fi, err)
	}
	// A real directory at DST is still copied into; a missing name made.
	if to, _, err := f.CopyFileOut("f", target, nil); err != nil || to != filepath.Join(target, "f") {
		t.Fatalf("into a directory: %q %v", to, err)
	}
	if to, _, err := f.CopyFileOut("f", filepath.Join(local, "new"), nil); err != nil || to != filepath.Join(local, "new") {
		t.Fatalf("to a new name: %q %v", to, err)
	}
	if b, _ := os.ReadFile(filepath.Join(local, "new")); string(b) != "from the sandbox" {
		t.Fatalf("new holds %q", b)
	}
	if _, _, err := f.CopyFileOut("missing", filepath.Join(local, "gone"), nil); err == nil {
		t.Fatal("copied a missing file")
	}
	if _, err := os.Lstat(filepath.Join(local, "gone")); err == nil {
		t.Fatal("a failed copy left its destination")
	}
}

// As root, sandbox cp into a directory another user controls: that user
// can point DST (or a directory on the way) at a directory only root may
// write, and the copy, as root, wrote there. It is refused now; a
// root-owned directory, sticky and world-writable or not, still works.
func TestCopyFileOutAsRootOtherUsersDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the check applies to root only")
	}
	const uid = 4242
	ws, local := t.TempDir(), t.TempDir()
	f, err := NewFS(FSOptions{Workspace: ws, Writable: true})
	mustT(t, err)
	mustT(t, os.WriteFile(filepath.Join(ws, "f"), []byte("from the sandbox"), 0o644))
	etc := filepath.Join(local, "etc") // root's
	mustT(t, os.Mkdir(etc, 0o755))
	alice := filepath.Join(local, "alice")
	mustT(t, os.Mkdir(alice, 0o755))
	mustT(t, os.Symlink(etc, filepath.Join(alice, "sub")))
	mustT(t, os.Lchown(filepath.Join(alice, "sub"), uid, uid))
	mustT(t, os.Chown(alice, uid, uid))

	for _, dst := range []string{
		filepath.Join(alice, "sub") + "/", // a link of hers, named as a directory
		filepath.Join(alice, "sub", "f"),  // a link of hers on the way
		filepath.Join(alice, "f"),         // her directory
		alice,                             // her directory, into it
	} {
		if to, _, err := f.CopyFileOut("f", dst, nil); err == nil || !strings.Contains(err.Error(), "as root, refusing") || hint.Of(err) == "" {
			t.Errorf("copy to %s: to %q, err %v", dst, to, err)
		}
	}
	for _, p := range []string{filepath.Join(etc, "f"), filepath.Join(alice, "f")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
	sticky := filepath.Join(local, "tmp")
	mustT(t, os.Mkdir(sticky, 0o755))
	mustT(t, os.Chmod(sticky, 0o777|os.ModeSticky))
	for _, dst := range []string{etc + "/", filepath.Join(sticky, "f")} {
		if _, _, err := f.CopyFileOut("f", dst, nil); err != nil {
			t.Errorf("copy to %s: %v", dst, err)
		}
	}
}

// A destination the file cannot be made in reports that, not the read
// side's broken pipe.
func TestCopyFileOutWriteError(t *testing.T) {
	ws, local := t.TempDir(), t.TempDir()
	f, err := NewFS(FSOptions{Workspace: ws, Writable: true})
	mustT(t, err)
	mustT(t, os.WriteFile(filepath.Join(ws, "f"), bytes.Repeat([]byte("x"), 1<<20), 0o644))
	dir := filepath.Join(local, "frozen")
	mustT(t, os.Mkdir(dir, 0o755))
	if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
		t.Skipf("chattr +i (to make a directory nothing can be made in): %v %s", err, out)
	}
	defer exec.Command("chattr", "-i", dir).Run()
	_, _, err = f.CopyFileOut("f", dir+"/", nil)
	if err == nil || !strings.Contains(err.Error(), "not permitted") || strings.Contains(err.Error(), "closed pipe") {
		t.Fatalf("copy into an immutable directory: %v", err)
	}
}
