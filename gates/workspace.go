package gates

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"

	"github.com/gatebridge/gatebridge/internal/hostilefs"
	"github.com/gatebridge/gatebridge/internal/lossless"
)

// workspace is a directory tree that file gates may touch. Every access goes
// through an [os.Root] opened per call, so "..", absolute symlinks and
// symlinks leading outside the tree are refused by the kernel-level walk,
// not by string checks alone.
//
// The root itself is opened by its path at each call, and whoever controls
// a directory on that path (the user owning /home/alice, for a root
// gatebridge working in /home/alice/proj as alice) can put a link to /etc
// or another directory in its place at any moment: each call checks that
// what it opened is the directory the gates were made on (same device and
// inode), and refuses otherwise.
//
// As root (on Linux), when someone else owns the workspace, each call
// opens the workspace root as root and then acts as its owner, the
// identity sandboxed commands run as ([workspace.call],
// [hostilefs.AsOwner]): the kernel refuses what the sandbox could not
// read or change itself, and what a call makes is the owner's.
type workspace struct {
	field   string      // the option naming it ("root", "writable_root")
	dir     string      // absolute, cleaned host path
	aliases []string    // absolute prefixes that name dir (dir, its real path, the sandbox mount point)
	id      fs.FileInfo // what dir was when the gates were made
	// as is the identity calls act as (nil: this process's): as root,
	// the owner of dir when that is not root.
	as *hostilefs.Owner
}

// newWorkspace checks that dir is an existing directory. alias, if set, is
// the absolute path at which the sandbox sees dir.
func newWorkspace(field, dir, alias string) (*workspace, error) {
	if dir == "" {
		return nil, fmt.Errorf("gates: options: %s is required", field)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("gates: options: %s: %w", field, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("gates: options: %s: %w", field, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("gates: options: %s: %q is not a directory", field, abs)
	}
	w := &workspace{field: field, dir: abs, aliases: []string{abs}, id: fi}
	if uid, gid, ok := fileOwner(fi); ok {
		w.as = hostilefs.ActAs(uid, gid)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
		w.aliases = append(w.aliases, real)
	}
	if alias != "" {
		if !filepath.IsAbs(alias) {
			return nil, fmt.Errorf("gates: options: sandbox path for %s: %q is not absolute", field, alias)
		}
		w.aliases = append(w.aliases, filepath.Clean(alias))
	}
	return w, nil
}

// open resolves path with [workspace.rel] and opens the workspace for one
// call; the caller closes the root.
func (w *workspace) open(gate, cwd, path string) (*os.Root, string, error) {
	rel, err := w.rel(gate, cwd, path)
	if err != nil {
		return nil, "", err
	}
	r, err := os.OpenRoot(w.dir)
	if err != nil {
		return nil, "", fmt.Errorf("%s: open workspace: %w", gate, err)
	}
	fi, err := r.Stat(".")
	if err != nil {
		r.Close()
		return nil, "", fmt.Errorf("%s: open workspace: %w", gate, err)
	}
	if !os.SameFile(fi, w.id) {
		r.Close()
		return nil, "", w.replaced(gate)
	}
	return r, rel, nil
}

// call opens the workspace for one call ([workspace.open], as this
// process) and runs fn with it: on a thread acting as the workspace's
// owner when w.as is set, else here.
func (w *workspace) call(gate, cwd, path string, fn func(r *os.Root, rel string) (int, error)) (int, error) {
	r, rel, err := w.open(gate, cwd, path)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	return w.do(func() (int, error) { return fn(r, rel) })
}

// do runs fn as the identity the workspace's calls act as (w.as).
func (w *workspace) do(fn func() (int, error)) (int, error) {
	if w.as == nil {
		return fn()
	}
	var code int
	err := hostilefs.AsOwner(*w.as, func() error {
		var err error
		code, err = fn()
		return err
	})
	return code, err
}

// replaced is the error of a call that found another directory (or a
// link to one) at the workspace's path.
func (w *workspace) replaced(gate string) error {
	return Deniedf("%s: the workspace %s was replaced since the gates started (renamed, or a link or another directory put in its place): refused; the gates keep to the directory they were started on (%s)",
		gate, quoteArg(w.dir), w.field)
}

// sameAs reports whether dev and ino (of a directory opened at w.dir) are
// those of the directory the gates were made on.
func (w *workspace) sameAs(dev, ino uint64) bool {
	d, i, ok := fileID(w.id)
	return ok && d == dev && i == ino
}

// rel turns a path given by the sandbox into a clean path relative to the
// workspace ("." for the root itself). Absolute paths are accepted only
// under the workspace (its host path, its real path or the sandbox mount
// point) and made relative. Relative paths are taken from the caller's
// working directory cwd (as the sandbox sees it) when it lies in the
// workspace, from the root when cwd is "" (a client that does not send
// it), and refused when cwd lies outside. Anything climbing out of the
// workspace with ".." is denied (exit 126). Symlinks are checked later,
// when the gate opens the path: through [os.Root] for the reading gates,
// by a walk that follows none for write_file.
func (w *workspace) rel(gate, cwd, p string) (string, error) {
	if p == "" {
		return "", Usagef("%s: empty path", gate)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", Usagef("%s: path contains a NUL byte", gate)
	}
	clean := filepath.Clean(p)
	if filepath.IsAbs(clean) {
		if r, ok := w.under(clean); ok {
			return r, nil
		}
		return "", outside(gate, p)
	}
	if cwd != "" {
		base, ok := "", false
		if filepath.IsAbs(cwd) && strings.IndexByte(cwd, 0) < 0 {
			base, ok = w.under(filepath.Clean(cwd))
		}
		if !ok {
			return "", Deniedf("%s: relative path %s, but the working directory %s is outside the workspace: give a path under %s",
				gate, quoteArg(p), quoteArg(cwd), w.aliases[len(w.aliases)-1])
		}
		clean = filepath.Join(base, clean)
	}
	if clean != "." && !filepath.IsLocal(clean) {
		return "", outside(gate, p)
	}
	return clean, nil
}

// display names the workspace path rel so that the caller, in its working
// directory cwd, can pass it back: relative to cwd when cwd lies in the
// workspace, absolute (as the sandbox sees the workspace) when it lies
// outside, relative to the root when cwd is unknown.
func (w *workspace) display(cwd, rel string) string {
	if cwd == "" {
		return rel
	}
	if base, ok := w.under(filepath.Clean(cwd)); ok && filepath.IsAbs(cwd) {
		if r, err := filepath.Rel(base, rel); err == nil {
			return r
		}
	}
	return filepath.Join(w.aliases[len(w.aliases)-1], rel)
}

// under returns the clean absolute path p relative to the workspace, if it
// lies in it under one of its names.
func (w *workspace) under(p string) (string, bool) {
	for _, a := range w.aliases {
		if r, ok := under(a, p); ok {
			return r, true
		}
	}
	return "", false
}

// under reports whether the clean absolute path p is prefix or inside it,
// and returns p relative to prefix.
func under(prefix, p string) (string, bool) {
	if p == prefix {
		return ".", true
	}
	if prefix == string(filepath.Separator) {
		return p[1:], true
	}
	if rest, ok := strings.CutPrefix(p, prefix+string(filepath.Separator)); ok {
		return rest, true
	}
	return "", false
}

func outside(gate, p string) error {
	return Deniedf("%s: %s is outside the workspace", gate, quoteArg(p))
}

// isEscape reports whether err is os.Root refusing a path that leaves the
// root. The standard library does not export that error, so match its text.
func isEscape(err error) bool {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return err != nil && err.Error() == "path escapes from parent"
}

// pathErr turns an error from an os.Root operation on the user's path p into
// the gate's error: escapes are denied (exit 126), others read
// `read_file: open "x": no such file or directory` and still match
// errors.Is(err, fs.ErrNotExist).
func pathErr(gate, op, p string, err error) error {
	if isEscape(err) {
		return outside(gate, p)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("%s: %s %s: %w", gate, op, quoteArg(p), err)
}

// kind names the type of a non-regular, non-directory file.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	case m.IsDir():
		return "a directory"
	default:
		return "not a regular file"
	}
}

// openRegular opens rel for reading if it is a regular file (after
// following symlinks inside the root). It stats first and opens with
// O_NONBLOCK, then checks the open file again, so a FIFO or device planted
// (or swapped in) never blocks the gate.
func openRegular(gate string, r *os.Root, rel, p string) (*os.File, fs.FileInfo, error) {
	fi, err := r.Stat(rel)
	if err != nil {
		return nil, nil, pathErr(gate, "stat", p, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fi, notRegular(gate, p, fi.Mode())
	}
	f, err := r.OpenFile(rel, os.O_RDONLY|oNonblock, 0)
	if err != nil {
		return nil, nil, pathErr(gate, "open", p, err)
	}
	fi, err = f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, pathErr(gate, "stat", p, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fi, notRegular(gate, p, fi.Mode())
	}
	return f, fi, nil
}

func notRegular(gate, p string, m fs.FileMode) error {
	if m.IsDir() {
		return fmt.Errorf("%s: %s is a directory", gate, quoteArg(p))
	}
	return Deniedf("%s: %s is %s; only regular files are read", gate, quoteArg(p), kind(m))
}

// openDir opens rel if it is a directory, without blocking on special files.
func openDir(gate string, r *os.Root, rel, p string) (*os.File, error) {
	fi, err := r.Stat(rel)
	if err != nil {
		return nil, pathErr(gate, "stat", p, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s: %s is not a directory", gate, quoteArg(p))
	}
	f, err := r.OpenFile(rel, os.O_RDONLY|oNonblock|oDirectory, 0)
	if err != nil {
		return nil, pathErr(gate, "open", p, err)
	}
	return f, nil
}

// limitedCopy copies at most max bytes of src to dst and reports whether src
// had more.
func limitedCopy(dst io.Writer, src io.Reader, max int64) (more bool, err error) {
	n, err := io.Copy(dst, io.LimitReader(src, max))
	if err != nil || n < max {
		return false, err
	}
	var b [1]byte
	k, _ := src.Read(b[:])
	return k > 0, nil
}

// displayName returns a name or path for one line of list_dir's or
// search's output, in a form the file gates take back ([pathArg]): as is,
// bytes that are not UTF-8 included, or in Go's quoted form
// ([lossless.Quote]) when it holds a control character (a newline would
// split the line; a tab, a carriage return or an escape would garble it)
// or starts with a double quote (so that a raw name never reads like a
// quoted one: a file literally called "\xff", quotes included, prints as
// "\"\\xff\"").
func displayName(name string) string {
	if strings.HasPrefix(name, `"`) {
		return lossless.Quote(name)
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return lossless.Quote(name)
		}
	}
	return name
}

// pathArg is the path a file gate's argument names: the quoted form
// [displayName] prints (the whole argument starts with a double quote and
// is a valid Go string literal) names the string it quotes; any other
// argument is the path itself. No name that displayName prints raw starts
// with a double quote, so every line it prints reads back as the name it
// came from. Every check on the path (workspace, NUL, protected paths)
// happens on what this returns.
func pathArg(arg string) string {
	if len(arg) >= 2 && arg[0] == '"' {
		if s, err := strconv.Unquote(arg); err == nil {
			return s
		}
	}
	return arg
}

// humanBytes formats n for a spec: "10 MiB", "64 KiB" or "1000 bytes".
func humanBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}
