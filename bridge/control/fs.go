package control

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/internal/hostilefs"
	"github.com/gatebridge/gatebridge/internal/lossless"
)

// Defaults of FSOptions fields left zero.
const (
	DefaultFSMaxChunk   = 1 << 20 // bytes of one fs read or write
	DefaultFSMaxEntries = gates.DefaultMaxDirEntries
)

// FSOptions configure an [FS].
type FSOptions struct {
	// Workspace is the host directory (absolute, links resolved) the
	// file API works in; Inside is where commands see it ("" : Workspace).
	Workspace, Inside string
	// Writable: the sandbox's workspace is writable (else every change
	// is refused).
	Writable bool
	// Protected are workspace paths never read, written, listed into or
	// renamed (sandbox.protected_paths; matched as the file gates do,
	// gates.ProtectedPath).
	Protected []string
	// MaxFileBytes bounds a file's size after a write, and a whole-file
	// read or copy; 0 means gates.DefaultMaxFileBytes.
	MaxFileBytes int64
	// MaxChunk bounds one Read's length and one Write's data;
	// MaxEntries one List. 0: the defaults above.
	MaxChunk   int64
	MaxEntries int
}

// FS is the file API of a sandbox's workspace: reads, writes and
// directory changes on the host side of it, with the rules of the file
// gates (gates/files.go). The sandbox may change the workspace while a
// call runs, so nothing is resolved by name twice: every call opens the
// workspace root by its (trusted) host path, checks it is the directory
// the FS was made on, and walks to the entry one component at a time with
// [hostilefs.Dir.Walk] (no symlink followed, none climbed out of), each
// component checked against the protected paths before it is opened; the
// entry itself is then used relative to the directory fd the walk
// opened. Only regular files with one link are read or written in place
// (a hard link could name a protected file); FIFOs and devices are
// refused without blocking. A whole-file write is atomic (a temporary
// file renamed over the name).
//
// As root (on Linux), every call acts as the workspace's owner, the
// identity sandboxed commands run as (hostilefs.AsOwner): the kernel refuses
// what they could not read or change, and what a call makes is theirs.
//
// Paths are relative to the workspace, or absolute under it as commands
// see it (Inside) or as the host does (Workspace). The file API covers the
// workspace only: the sandbox's own scratch (/tmp) is not a host
// directory on every backend.
type FS struct {
	o        FSOptions
	dev, ino uint64
	// as is the identity the calls act as (nil: this process's): as
	// root, the workspace's owner, whom sandboxed commands run as, so
	// that the file API reads, writes, renames and removes only what
	// they could (a root-only file in the workspace stays unread).
	as *hostilefs.Owner
	// pre is the workspace root opened for one call (as this process,
	// before it acts as as), in the copy of the FS that call uses.
	pre *hostilefs.Dir
}

// NewFS returns the file API of a workspace; it records the workspace's
// identity now, and each call refuses a workspace replaced since.
func NewFS(o FSOptions) (*FS, error) {
	if o.Workspace == "" || !filepath.IsAbs(o.Workspace) {
		return nil, invalid("workspace", "the file API needs the sandbox's workspace as an absolute host path, not %q", o.Workspace)
	}
	o.Workspace = filepath.Clean(o.Workspace)
	if o.Inside == "" {
		o.Inside = o.Workspace
	}
	setDefault(&o.MaxFileBytes, gates.DefaultMaxFileBytes)
	setDefault(&o.MaxChunk, DefaultFSMaxChunk)
	setDefault(&o.MaxEntries, DefaultFSMaxEntries)
	root, err := hostilefs.OpenDir(o.Workspace)
	if err != nil {
		return nil, fsErr("open the workspace", o.Workspace, err)
	}
	defer root.Close()
	st, err := root.Stat()
	if err != nil {
		return nil, fsErr("stat the workspace", o.Workspace, err)
	}
	f := &FS{o: o, dev: st.Dev, ino: st.Ino}
	f.as = hostilefs.ActAs(st.UID, st.GID)
	return f, nil
}

// call runs fn with the FS a call uses: f itself, or, when f acts as the
// workspace's owner, a copy holding the workspace root opened by this
// process, run on a thread with the owner's identity (hostilefs.AsOwner).
func (f *FS) call(fn func(f *FS) error) error {
	if f.as == nil {
		return fn(f)
	}
	root, err := f.openRoot()
	if err != nil {
		return err
	}
	defer root.Close()
	g := *f
	g.pre = root
	return hostilefs.AsOwner(*f.as, func() error { return fn(&g) })
}

// FS is the file API of the sandbox's workspace, made at the first call
// (which records the workspace's identity for the sandbox's life).
func (sb *Sandbox) FS() (*FS, error) {
	sb.fsOnce.Do(func() {
		sb.fs, sb.fsErr = NewFS(FSOptions{Workspace: sb.workspace, Inside: sb.inside, Writable: sb.writable,
			Protected: sb.h.opts.Process.ProtectedPaths, MaxFileBytes: sb.h.opts.FSMaxFileBytes})
	})
	return sb.fs, sb.fsErr
}

// Options are the FS's options, defaults filled.
func (f *FS) Options() FSOptions { return f.o }

// FileInfo describes one entry (its link, not its target).
type FileInfo struct {
	// Name is the entry's name (List) or the path asked for (Stat).
	Name    string
	Type    string // "file", "directory", "symlink" or "other"
	Size    int64
	Mode    fs.FileMode
	ModTime time.Time
}

// Chunk is what Read read.
type Chunk struct {
	Data []byte
	// Size is the file's size when it was opened; EOF: Data reaches it.
	Size int64
	EOF  bool
}

// WriteMode says where Write puts its data.
type WriteMode struct {
	// Append adds the data at the end; Offset (≥ 0, with At set) writes
	// it there. Neither: the file is replaced atomically by the data.
	Append bool
	At     bool
	Offset int64
}

// testHookAfterCheck, set by tests only, runs after each protected-path
// check passes, with the path checked: where a sandbox racing the call
// would swap a directory for a symlink.
var testHookAfterCheck func(rel string)

// Read reads up to length bytes (0: MaxChunk; at most MaxChunk) of the
// file path from offset.
func (f *FS) Read(path string, offset, length int64) (c *Chunk, err error) {
	err = f.call(func(f *FS) (err error) { c, err = f.read(path, offset, length); return err })
	return c, err
}

func (f *FS) read(path string, offset, length int64) (*Chunk, error) {
	if offset < 0 || length < 0 {
		return nil, invalid("offset", "%q and %q must not be negative", "offset", "length")
	}
	if length == 0 || length > f.o.MaxChunk {
		length = f.o.MaxChunk
	}
	file, info, err := f.openRead(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	buf := make([]byte, min(length, max(info.Size-offset, 0)+1))
	n, err := file.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fsErr("read", path, err)
	}
	if int64(n) > length {
		n = int(length)
	}
	return &Chunk{Data: buf[:n], Size: info.Size, EOF: offset+int64(n) >= info.Size}, nil
}

// ReadTo copies the whole file path to w, at most MaxFileBytes.
func (f *FS) ReadTo(path string, w io.Writer) (n int64, err error) {
	err = f.call(func(f *FS) (err error) { n, err = f.readTo(path, w); return err })
	return n, err
}

func (f *FS) readTo(path string, w io.Writer) (int64, error) {
	file, info, err := f.openRead(path)
	if err != nil {
		return 0, err
	}
	defer file.Close()
	if info.Size > f.o.MaxFileBytes {
		return 0, tooLarge(path, info.Size, f.o.MaxFileBytes)
	}
	n, err := io.Copy(w, io.LimitReader(file, f.o.MaxFileBytes+1))
	if err != nil {
		return n, fsErr("read", path, err)
	}
	if n > f.o.MaxFileBytes {
		return n, tooLarge(path, n, f.o.MaxFileBytes)
	}
	return n, nil
}

func (f *FS) openRead(path string) (*os.File, hostilefs.Info, error) {
	rel, err := f.rel(path)
	if err != nil {
		return nil, hostilefs.Info{}, err
	}
	d, base, err := f.walkParent(path, rel, false)
	if err != nil {
		return nil, hostilefs.Info{}, err
	}
	defer d.Close()
	file, info, err := d.OpenFile(base)
	if err != nil {
		return nil, hostilefs.Info{}, fsErr("open", path, err)
	}
	return file, info, nil
}

// Write writes data to the file path (see [WriteMode]), making missing
// parent directories. The file's size afterwards is at most MaxFileBytes.
func (f *FS) Write(path string, data []byte, m WriteMode) error {
	return f.call(func(f *FS) error { return f.write(path, data, m) })
}

func (f *FS) write(path string, data []byte, m WriteMode) error {
	if int64(len(data)) > f.o.MaxChunk {
		return &Error{Kind: KindLimit, Field: "data", Msg: fmt.Sprintf("%d bytes in one write, over the %d-byte chunk limit", len(data), f.o.MaxChunk),
			Help: "write the file in chunks: the first one replaces it, the next ones append"}
	}
	if m.At && m.Offset < 0 {
		return invalid("offset", "%q must not be negative", "offset")
	}
	if m.At && m.Append {
		return invalid("offset", "give %q or %q, not both", "offset", "append")
	}
	if !m.At && !m.Append {
		_, err := f.writeFrom(path, strings.NewReader(string(data)))
		return err
	}
	d, base, owner, err := f.writeParent(path)
	if err != nil {
		return err
	}
	defer d.Close()
	file, err := d.OpenWrite(base, true, hostilefs.WriteOptions{Perm: 0o644, Owner: owner})
	if err != nil {
		return fsErr("open", path, err)
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return fsErr("stat", path, err)
	}
	off := m.Offset
	if m.Append {
		off = st.Size()
	}
	// off > MaxFileBytes-len first: off+len may overflow int64.
	if off > f.o.MaxFileBytes-int64(len(data)) {
		return tooLarge(path, max(off, off+int64(len(data))), f.o.MaxFileBytes)
	}
	if _, err := file.WriteAt(data, off); err != nil {
		return fsErr("write", path, err)
	}
	return nil
}

// WriteFrom replaces the file path atomically with what r holds (at most
// MaxFileBytes, streamed), making missing parent directories; a file
// replaced keeps its mode and, as root, its owner.
func (f *FS) WriteFrom(path string, r io.Reader) (n int64, err error) {
	err = f.call(func(f *FS) (err error) { n, err = f.writeFrom(path, r); return err })
	return n, err
}

func (f *FS) writeFrom(path string, r io.Reader) (int64, error) {
	d, base, owner, err := f.writeParent(path)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	n, err := d.ReplaceFrom(base, r, f.o.MaxFileBytes, hostilefs.WriteOptions{Perm: 0o644, Owner: owner, Sync: true})
	if errors.Is(err, hostilefs.ErrTooLarge) {
		return 0, tooLarge(path, n, f.o.MaxFileBytes)
	}
	if err != nil {
		return 0, fsErr("write", path, err)
	}
	return n, nil
}

// List lists the directory path, sorted by name, and reports whether it
// held more than MaxEntries entries.
func (f *FS) List(path string) (fis []FileInfo, more bool, err error) {
	err = f.call(func(f *FS) (err error) { fis, more, err = f.list(path); return err })
	return fis, more, err
}

func (f *FS) list(path string) ([]FileInfo, bool, error) {
	rel, err := f.rel(path)
	if err != nil {
		return nil, false, err
	}
	d, err := f.walk(path, rel, false, nil)
	if err != nil {
		return nil, false, err
	}
	defer d.Close()
	ents, more, err := d.ReadDir(f.o.MaxEntries)
	if err != nil {
		return nil, false, fsErr("list", path, err)
	}
	out := make([]FileInfo, 0, len(ents))
	for _, e := range ents {
		out = append(out, fileInfo(e.Name, e.Info, e.ModTime))
	}
	sortInfos(out)
	return out, more, nil
}

// Stat describes path without following a link.
func (f *FS) Stat(path string) (fi *FileInfo, err error) {
	err = f.call(func(f *FS) (err error) { fi, err = f.stat(path); return err })
	return fi, err
}

func (f *FS) stat(path string) (*FileInfo, error) {
	rel, err := f.rel(path)
	if err != nil {
		return nil, err
	}
	if rel == "." {
		d, err := f.walk(path, ".", false, nil)
		if err != nil {
			return nil, err
		}
		defer d.Close()
		st, err := d.Stat()
		if err != nil {
			return nil, fsErr("stat", path, err)
		}
		fi := fileInfo(path, st, time.Time{})
		return &fi, nil
	}
	d, base, err := f.walkParent(path, rel, false)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	st, mt, err := d.LstatTime(base)
	if err != nil {
		return nil, fsErr("stat", path, err)
	}
	fi := fileInfo(path, st, mt)
	return &fi, nil
}

// Mkdir makes the directory path; with parents, missing parents too and
// an existing directory is no error.
func (f *FS) Mkdir(path string, parents bool) error {
	return f.call(func(f *FS) error { return f.mkdir(path, parents) })
}

func (f *FS) mkdir(path string, parents bool) error {
	rel, err := f.writableRel(path)
	if err != nil {
		return err
	}
	if rel == "." {
		if parents {
			return nil
		}
		return &Error{Kind: KindConflict, Field: "path", Msg: fmt.Sprintf("%s exists: it is the workspace", lossless.Quote(path))}
	}
	owner, err := f.owner()
	if err != nil {
		return err
	}
	wo := hostilefs.WalkOptions{Create: parents, Perm: 0o755, Owner: owner}
	if parents {
		d, err := f.walk(path, rel, true, owner)
		if err != nil {
			return err
		}
		return d.Close()
	}
	d, base, err := f.walkParent(path, rel, false)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Mkdir(base, wo); err != nil {
		return fsErr("make directory", path, err)
	}
	return nil
}

// Remove removes path (a link itself, not its target); a directory only
// when empty unless recursive. With force, a missing path is no error.
// The workspace itself and protected paths are refused.
func (f *FS) Remove(path string, recursive, force bool) error {
	return f.call(func(f *FS) error { return f.remove(path, recursive, force) })
}

func (f *FS) remove(path string, recursive, force bool) error {
	rel, err := f.writableRel(path)
	if err != nil {
		return err
	}
	if rel == "." {
		return refused(path, "is the workspace itself; remove what is in it")
	}
	if err := f.checkBelow("path", path, rel, "removed"); err != nil {
		return err
	}
	d, base, err := f.walkParent(path, rel, false)
	if err != nil {
		if force && KindOf(err) == KindNotFound {
			return nil
		}
		return err
	}
	defer d.Close()
	if err := d.Remove(base, recursive); err != nil {
		if force && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fsErr("remove", path, err)
	}
	return nil
}

// Rename moves path to newPath (a link is moved, not followed), making
// newPath's missing parents; with replace unset an entry at newPath is an
// error.
func (f *FS) Rename(path, newPath string, replace bool) error {
	return f.call(func(f *FS) error { return f.rename(path, newPath, replace) })
}

func (f *FS) rename(path, newPath string, replace bool) error {
	rel, err := f.rel(path)
	if err != nil {
		return err
	}
	nrel, err := f.relField("newPath", newPath)
	if err != nil {
		return err
	}
	if rel == "." || nrel == "." {
		return refused(path, "or the new path is the workspace itself")
	}
	if _, err := f.writableRel(path); err != nil {
		return err
	}
	// A directory renamed onto the parent of a protected entry of more
	// than one component would plant what the client put in it; the
	// parent renamed away would take the entry along.
	if err := f.checkBelow("path", path, rel, "renamed"); err != nil {
		return err
	}
	if err := f.checkBelow("newPath", newPath, nrel, "replaced by a rename"); err != nil {
		return err
	}
	d, base, err := f.walkParent(path, rel, false)
	if err != nil {
		return err
	}
	defer d.Close()
	nd, nbase, _, err := f.writeParent(newPath)
	if err != nil {
		return err
	}
	defer nd.Close()
	if err := d.Rename(base, nd, nbase, replace); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return &Error{Kind: KindConflict, Field: "newPath", Msg: fmt.Sprintf("rename %s: %s exists", lossless.Quote(path), lossless.Quote(newPath)),
				Err: err, Help: "remove it first, or set overwrite"}
		}
		return fsErr("rename", path, err)
	}
	return nil
}

// rel turns path into a clean path relative to the workspace ("." for
// the workspace itself): relative paths from the workspace's root,
// absolute ones under the workspace as commands see it or as the host
// does; anything else, and ".." climbing out, is refused.
func (f *FS) rel(path string) (string, error) { return f.relField("path", path) }

func (f *FS) relField(field, path string) (string, error) {
	if path == "" {
		return "", invalid(field, "%q is empty", field)
	}
	if strings.IndexByte(path, 0) >= 0 {
		return "", invalid(field, "%q %s holds a NUL byte", field, lossless.Quote(path))
	}
	clean := filepath.Clean(path)
	if filepath.IsAbs(clean) {
		for _, base := range []string{f.o.Inside, f.o.Workspace} {
			if r, err := filepath.Rel(base, clean); err == nil && (r == "." || filepath.IsLocal(r)) {
				return r, nil
			}
		}
		return "", &Error{Kind: KindInvalid, Field: field, Msg: fmt.Sprintf("%s is outside the workspace", lossless.Quote(path)),
			Help: fmt.Sprintf("give a path relative to the workspace, or absolute under %s", f.o.Inside)}
	}
	if clean != "." && !filepath.IsLocal(clean) {
		return "", &Error{Kind: KindInvalid, Field: field, Msg: fmt.Sprintf("%s leaves the workspace", lossless.Quote(path)),
			Help: "give a path relative to the workspace, without .. climbing out of it"}
	}
	return clean, nil
}

// check refuses a protected rel; named after the caller's path.
func (f *FS) check(path string) func(string) error {
	return func(sub string) error {
		if p, ok := gates.ProtectedPath(sub, f.o.Protected); ok {
			return &Error{Kind: KindInvalid, Field: "path", Msg: fmt.Sprintf("%s is under the protected path %s (sandbox.protected_paths): refused", lossless.Quote(path), p),
				Help: "host tools run what is there: the file API neither reads nor writes it"}
		}
		if testHookAfterCheck != nil {
			testHookAfterCheck(sub)
		}
		return nil
	}
}

// checkBelow refuses rel when a protected entry of more than one
// component lies under it (tools of tools/hooks): removing or moving it
// removes or moves the entry, and under docker detaches the read-only
// mount that keeps the sandbox from writing there; a directory renamed
// onto it plants what it holds. (A one-component entry, sub/.git, moves
// with its parent and stays protected by name.)
func (f *FS) checkBelow(field, path, rel, what string) error {
	if p, ok := gates.ProtectedBelow(rel, f.o.Protected); ok {
		return &Error{Kind: KindInvalid, Field: field, Msg: fmt.Sprintf("%s holds the protected path %s (sandbox.protected_paths): it is not %s", lossless.Quote(path), p, what),
			Help: "host tools run what is there: the file API neither moves nor removes it, nor puts a directory in its place"}
	}
	return nil
}

// root opens the workspace root and checks it is the one NewFS saw (in a
// call acting as the owner: the one the call opened first).
func (f *FS) root() (*hostilefs.Dir, error) {
	if f.pre != nil {
		d, err := f.pre.Walk(".", hostilefs.WalkOptions{})
		if err != nil {
			return nil, fsErr("open the workspace", f.o.Workspace, err)
		}
		return d, nil
	}
	return f.openRoot()
}

// openRoot opens the workspace root by its path and checks it is the one
// NewFS saw.
func (f *FS) openRoot() (*hostilefs.Dir, error) {
	root, err := hostilefs.OpenDir(f.o.Workspace)
	if err != nil {
		return nil, fsErr("open the workspace", f.o.Workspace, err)
	}
	st, err := root.Stat()
	if err != nil {
		root.Close()
		return nil, fsErr("stat the workspace", f.o.Workspace, err)
	}
	if st.Dev != f.dev || st.Ino != f.ino {
		root.Close()
		return nil, &Error{Kind: KindInvalid, Field: "path", Msg: fmt.Sprintf("the workspace %s was replaced since the sandbox opened (renamed, or a link put in its place): refused", f.o.Workspace),
			Help: "reopen the sandbox on the directory you mean"}
	}
	return root, nil
}

// walk opens the directory rel of the workspace (see [FS]).
func (f *FS) walk(path, rel string, create bool, owner *hostilefs.Owner) (*hostilefs.Dir, error) {
	root, err := f.root()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	check := f.check(path)
	if rel == "." {
		if err := check("."); err != nil {
			return nil, err
		}
	}
	d, err := root.Walk(rel, hostilefs.WalkOptions{Check: check, Create: create, Perm: 0o755, Owner: owner})
	if err != nil {
		return nil, fsErr("open", path, err)
	}
	return d, nil
}

// walkParent opens rel's parent and checks rel itself (not the
// workspace: "." is refused as a file).
func (f *FS) walkParent(path, rel string, create bool) (*hostilefs.Dir, string, error) {
	if rel == "." {
		return nil, "", invalid("path", "%s is the workspace directory, not a file", lossless.Quote(path))
	}
	var owner *hostilefs.Owner
	if create {
		var err error
		if owner, err = f.owner(); err != nil {
			return nil, "", err
		}
	}
	d, err := f.walk(path, filepath.Dir(rel), create, owner)
	if err != nil {
		return nil, "", err
	}
	if err := f.check(path)(rel); err != nil {
		d.Close()
		return nil, "", err
	}
	return d, filepath.Base(rel), nil
}

// writeParent is walkParent for a change: the workspace must be
// writable, missing parents are made.
func (f *FS) writeParent(path string) (*hostilefs.Dir, string, *hostilefs.Owner, error) {
	rel, err := f.writableRel(path)
	if err != nil {
		return nil, "", nil, err
	}
	// Refused at once, before any directory is made.
	if err := f.check(path)(rel); err != nil {
		return nil, "", nil, err
	}
	owner, err := f.owner()
	if err != nil {
		return nil, "", nil, err
	}
	d, base, err := f.walkParent(path, rel, true)
	return d, base, owner, err
}

// writableRel is path relative to the workspace (rel) for a change: the
// workspace must be writable.
func (f *FS) writableRel(path string) (string, error) {
	rel, err := f.rel(path)
	if err != nil || f.o.Writable {
		return rel, err
	}
	return "", &Error{Kind: KindInvalid, Field: "path", Msg: fmt.Sprintf("cannot change %s: the sandbox's workspace is read-only", lossless.Quote(path)),
		Help: "open the sandbox with a writable workspace (writableWorkspace / --writable-workspace) to write files"}
}

// owner is who owns what the file API makes: as root, the workspace
// root's owner (the identity sandboxed commands run as), as write_file
// does; else nil (this process).
func (f *FS) owner() (*hostilefs.Owner, error) {
	if os.Geteuid() != 0 || f.as != nil {
		return nil, nil // acting as the owner, what a call makes is the owner's
	}
	root, err := f.root()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	st, err := root.Stat()
	if err != nil {
		return nil, fsErr("stat the workspace", f.o.Workspace, err)
	}
	return &hostilefs.Owner{UID: st.UID, GID: st.GID}, nil
}

func fileInfo(name string, st hostilefs.Info, mt time.Time) FileInfo {
	t := "other"
	switch {
	case st.Mode.IsRegular():
		t = "file"
	case st.Mode.IsDir():
		t = "directory"
	case st.Mode&fs.ModeSymlink != 0:
		t = "symlink"
	}
	return FileInfo{Name: name, Type: t, Size: st.Size, Mode: st.Mode, ModTime: mt}
}

func refused(path, what string) *Error {
	return &Error{Kind: KindInvalid, Field: "path", Msg: fmt.Sprintf("%s %s (refused)", lossless.Quote(path), what)}
}

func tooLarge(path string, n, max int64) *Error {
	return &Error{Kind: KindLimit, Field: "path", Msg: fmt.Sprintf("%s would be %d bytes, over the %d-byte file limit", lossless.Quote(path), n, max),
		Help: "gates.max_file_bytes sets the limit"}
}

// fsErr sorts an error of a hostilefs call on path: a refusal (a link, a
// special file, a hard link, a file where a directory belongs) is
// invalid with the reason, a missing entry not found, an entry in the
// way a conflict; the rest internal.
func fsErr(op, path string, err error) error {
	var ce *Error
	if errors.As(err, &ce) {
		return err // a protected path, refused by the check
	}
	why := err.Error()
	var pe *fs.PathError
	var fe *hostilefs.FileError
	switch {
	case errors.As(err, &pe):
		why = lossless.Quote(pe.Path) + " " + pe.Err.Error()
	case errors.As(err, &fe):
		why = lossless.Quote(fe.Name) + " " + fe.Err.Error()
	}
	e := &Error{Kind: KindInternal, Msg: fmt.Sprintf("%s %s: %s", op, lossless.Quote(path), why), Err: err}
	switch {
	case errors.Is(err, hostilefs.ErrSymlink):
		e.Kind, e.Field, e.Help = KindInvalid, "path", "the file API follows no symbolic link in the workspace; name the target itself"
	case errors.Is(err, hostilefs.ErrChanged), hostilefs.Refused(err), errors.Is(err, hostilefs.ErrBadPath):
		e.Kind, e.Field = KindInvalid, "path"
	case errors.Is(err, fs.ErrNotExist):
		e.Kind, e.Field = KindNotFound, "path"
	case errors.Is(err, fs.ErrExist), errors.Is(err, syscall.ENOTEMPTY):
		e.Kind, e.Field = KindConflict, "path"
	case errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTDIR):
		e.Kind, e.Field = KindInvalid, "path"
	case errors.Is(err, fs.ErrPermission):
		e.Kind, e.Field = KindInvalid, "path"
		e.Help = "the file API acts as the workspace's owner, whom sandboxed commands run as: what they may not read or change, it may not either"
	}
	if hostilefs.Refused(err) && e.Help == "" {
		e.Help = "the file API reads and writes regular files with one link only"
	}
	return e
}

func sortInfos(fis []FileInfo) {
	slices.SortFunc(fis, func(a, b FileInfo) int { return strings.Compare(a.Name, b.Name) })
}

// CopyIn writes what r holds to dst atomically (WriteFrom), as `cp`
// does: into the directory dst when dst ends in "/" or is one, under the
// name base. It returns the path written.
func (f *FS) CopyIn(dst, base string, r io.Reader) (string, int64, error) {
	into := strings.HasSuffix(dst, "/")
	if !into {
		if fi, err := f.Stat(dst); err == nil && fi.Type == "directory" {
			into = true
		}
	}
	if into {
		if base == "" || base == "." || base == ".." || base == "/" {
			return "", 0, invalid("path", "copying into the directory %s needs a file name", lossless.Quote(dst))
		}
		dst = filepath.Join(dst, base)
	}
	n, err := f.WriteFrom(dst, r)
	return dst, n, err
}
