package control

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/gatebridge/gatebridge/internal/hint"
	"github.com/gatebridge/gatebridge/internal/hostilefs"
	"github.com/gatebridge/gatebridge/internal/lossless"
)

// CopyFileIn copies the local regular file src (stdin for "-") to dst in
// the workspace, into the directory dst names keeping src's name (as
// CopyIn does); it returns where it went and how many bytes.
func (f *FS) CopyFileIn(src, dst string, stdin io.Reader) (to string, n int64, err error) {
	r, base := stdin, ""
	if src != "-" {
		file, err := os.Open(src)
		if err != nil {
			return "", 0, err
		}
		defer file.Close()
		if st, err := file.Stat(); err != nil {
			return "", 0, err
		} else if !st.Mode().IsRegular() {
			return "", 0, hint.With(fmt.Errorf("sandbox cp: %s is not a regular file", src), "copy files one at a time (a directory: tar it first)")
		}
		r, base = file, filepath.Base(src)
	}
	return f.CopyIn(dst, base, r)
}

// CopyFileOut copies src in the workspace to the local path dst (stdout
// for "-"; into the directory dst names, or a path ending in /, keeping
// src's name); it returns where it went ("" for stdout) and how many
// bytes.
//
// The local side may be someone else's too, so it is written as the
// sandbox's side is: the destination directory is opened once, a link
// at dst is not followed (refused; a directory at dst is entered only if
// it is not a link), and the file is made there from the directory's fd
// as a temporary file (O_EXCL|O_NOFOLLOW, mode 0600) renamed over the
// name. As root, a destination directory that someone other than root
// controls (owned by another user, reached through a directory or link
// another user owns, or writable by group or others without the sticky
// bit) is refused: its owner could point the path at a directory only
// root may write (/etc) between the check and the write.
func (f *FS) CopyFileOut(src, dst string, stdout io.Writer) (to string, n int64, err error) {
	if dst == "-" {
		n, err := f.ReadTo(src, stdout)
		return "", n, err
	}
	d, dir, name, err := openCopyDest(dst, filepath.Base(src))
	if err != nil {
		return "", 0, err
	}
	defer d.Close()
	pr, pw := io.Pipe()
	readErr := make(chan error, 1)
	var readFailed atomic.Bool
	go func() {
		_, err := f.ReadTo(src, pw)
		if err != nil {
			readFailed.Store(true) // before the write can see it
		}
		pw.CloseWithError(err)
		readErr <- err
	}()
	n, err = d.WriteAtomicFrom(name, pr, -1, hostilefs.WriteOptions{Perm: 0o600})
	byRead := readFailed.Load()
	pr.CloseWithError(io.ErrClosedPipe) // a write that stopped early stops the read
	rerr := <-readErr
	switch {
	case err != nil && !byRead: // the write failed first (the read then on the closed pipe)
		return "", 0, copyDestErr(filepath.Join(dir, name), err)
	case rerr != nil:
		return "", 0, rerr
	case err != nil:
		return "", 0, copyDestErr(filepath.Join(dir, name), err)
	}
	return filepath.Join(dir, name), n, nil
}

// openCopyDest opens the directory CopyFileOut writes into and says the
// name it writes there (base, src's, when dst names a directory).
func openCopyDest(dst, base string) (d *hostilefs.Dir, dir, name string, err error) {
	into := strings.HasSuffix(dst, "/")
	dir, name = filepath.Dir(dst), filepath.Base(dst)
	if into {
		dir, name = filepath.Clean(dst), base
	}
	if err := checkCopyDestPath(dir); err != nil {
		return nil, "", "", err
	}
	d, err = hostilefs.OpenDir(dir)
	if err != nil {
		return nil, "", "", copyDestErr(dir, err)
	}
	if err := checkCopyDestDir(d, dir); err != nil {
		d.Close()
		return nil, "", "", err
	}
	if into {
		return d, dir, name, nil
	}
	fi, err := d.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return d, dir, name, nil
	case err != nil:
		d.Close()
		return nil, "", "", copyDestErr(dst, err)
	case fi.Mode&fs.ModeSymlink != 0:
		d.Close()
		return nil, "", "", &Error{Kind: KindInvalid, Field: "path",
			Msg:  fmt.Sprintf("sandbox cp: %s is a symbolic link: not followed, not replaced", lossless.Quote(dst)),
			Help: "name the file or directory it points to, or remove the link first"}
	case !fi.Mode.IsDir():
		return d, dir, name, nil
	}
	// dst is a directory (not a link to one): into it, keeping src's name.
	sub, err := d.Walk(name, hostilefs.WalkOptions{})
	d.Close()
	if err != nil {
		return nil, "", "", copyDestErr(dst, err)
	}
	if err := checkCopyDestDir(sub, dst); err != nil {
		sub.Close()
		return nil, "", "", err
	}
	return sub, filepath.Clean(dst), base, nil
}

// checkCopyDestPath refuses, as root, a destination directory reached
// through a directory or link someone other than root controls.
func checkCopyDestPath(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return copyDestErr(dir, err)
	}
	steps, _, err := hostilefs.PathSteps(abs)
	if err != nil {
		return copyDestErr(dir, err)
	}
	for _, s := range steps {
		what := "the directory " + s.Path
		if s.Link {
			what = "the symbolic link " + s.Path
		}
		if s.UID != 0 {
			return copyDestRefused(dir, fmt.Sprintf("%s on the way belongs to uid %d", what, s.UID))
		}
		if s.OpenToOthers() {
			return copyDestRefused(dir, fmt.Sprintf("%s on the way is writable by group or others (mode %v, not sticky)", what, fs.FileMode(s.Mode&0o777)))
		}
	}
	return nil
}

// checkCopyDestDir refuses, as root, writing into the opened directory d
// when someone other than root controls it.
func checkCopyDestDir(d *hostilefs.Dir, dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	st, err := d.Stat()
	if err != nil {
		return copyDestErr(dir, err)
	}
	s := hostilefs.PathStep{Path: dir, UID: st.UID, Mode: uint32(st.Mode.Perm())}
	if st.Mode&fs.ModeSticky != 0 {
		s.Mode |= 0o1000
	}
	switch {
	case s.UID != 0:
		return copyDestRefused(dir, fmt.Sprintf("it belongs to uid %d", s.UID))
	case s.OpenToOthers():
		return copyDestRefused(dir, fmt.Sprintf("it is writable by group or others (mode %v, not sticky)", st.Mode.Perm()))
	}
	return nil
}

func copyDestRefused(dir, why string) error {
	return &Error{Kind: KindInvalid, Field: "path",
		Msg: fmt.Sprintf("sandbox cp: as root, refusing to write into %s: %s, and whoever controls it could point it at a directory only root may write (/etc, say)", lossless.Quote(dir), why),
		Help: "copy into a directory only root controls and move the file from there, or copy to stdout as root and write it as that user: " +
			"gatebridge sandbox cp NAME:PATH - | sudo -u USER tee FILE >/dev/null"}
}

func copyDestErr(path string, err error) error {
	var ce *Error
	if errors.As(err, &ce) {
		return err
	}
	return fmt.Errorf("sandbox cp: %s: %w", lossless.Quote(path), err)
}
