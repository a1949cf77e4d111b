//go:build unix

package hostilefs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Trust says what [ReadTrusted] accepts: a file that only this process's
// user (or root) could have written, such as a config file (whoever can
// write it defines host commands) or a secret (a token, a TLS key).
type Trust struct {
	// MaxBytes caps what is read; a larger file is refused.
	MaxBytes int64
	// Forbid are the mode bits group and others may not have: 0o022 (no
	// one else may write it), 0o077 (nor read it). A file that others may
	// not read (a 0o004 bit here) must have one link only: under another
	// name (in a workspace, say) it could be read.
	Forbid fs.FileMode
	// Path checks every directory and symlink on the way to the file, as
	// the kernel resolves it: each must be owned by us or root, and a
	// directory not writable by group or others unless it is sticky
	// (/tmp). Without Path only the file itself is checked, and it may
	// not be a symlink.
	Path bool
}

// TrustProblem is why [ReadTrusted] refused a file.
type TrustProblem int

const (
	TrustIO         TrustProblem = iota // TrustError.Op failed with Err (the file is missing, say)
	TrustNotRegular                     // the file is not a regular file
	TrustNotDir                         // a directory on the way is something else
	TrustSymlink                        // the file is a symlink (without Trust.Path)
	TrustLinkLoop                       // too many symlinks on the way
	TrustOwner                          // owned by UID: neither us nor root
	TrustWritable                       // Mode lets group or others write it
	TrustReadable                       // Mode lets others read it
	TrustHardLinks                      // Nlink names: it could be read under another
	TrustTooLarge                       // over Trust.MaxBytes
)

// TrustError is a file [ReadTrusted] refused, or could not read. It says
// what was wrong with which object on the way: the caller, which knows
// what the file is for, words the message and its hint.
type TrustError struct {
	Problem TrustProblem
	Path    string      // the object: the file (as resolved), or a directory or link on the way
	Kind    string      // "file", "directory" or "symlink"
	Op      string      // TrustIO: "abs", "lstat", "readlink", "open", "stat" or "read"
	Err     error       // TrustIO: the error of the call that failed
	UID     int         // TrustOwner
	Mode    fs.FileMode // TrustWritable, TrustReadable: the permission bits
	Nlink   uint64      // TrustHardLinks
	Max     int64       // TrustTooLarge
}

func (e *TrustError) Error() string {
	switch e.Problem {
	case TrustIO:
		return fmt.Sprintf("%s %s: %v", e.Op, e.Path, e.Err)
	case TrustNotRegular:
		return e.Path + " is not a regular file"
	case TrustNotDir:
		return e.Path + " is not a directory"
	case TrustSymlink:
		return e.Path + " is a symbolic link (refused: it may point anywhere)"
	case TrustLinkLoop:
		return e.Path + ": too many levels of symbolic links"
	case TrustOwner:
		return fmt.Sprintf("%s %s is owned by uid %d, not by this user (uid %d) or root", e.Kind, e.Path, e.UID, os.Geteuid())
	case TrustWritable:
		return fmt.Sprintf("%s %s is writable by others (mode %v)", e.Kind, e.Path, e.Mode)
	case TrustReadable:
		return fmt.Sprintf("%s is readable by others (mode %v)", e.Path, e.Mode)
	case TrustHardLinks:
		return fmt.Sprintf("%s has %d hard links", e.Path, e.Nlink)
	default:
		return fmt.Sprintf("%s is over %d bytes", e.Path, e.Max)
	}
}

func (e *TrustError) Unwrap() error { return e.Err }

// ReadTrusted reads the file at path if no one but this process's user
// (or root) could have written it (see [Trust]), and returns its contents
// and its resolved path. The file is opened without following a link in
// its last component (O_NOFOLLOW, O_NONBLOCK: a FIFO does not block) and
// checked and read through that one descriptor, so it cannot be swapped
// between the check and the read: a regular file, owned by us or root,
// with none of t.Forbid's mode bits. Errors are [*TrustError].
func ReadTrusted(path string, t Trust) (data []byte, real string, err error) {
	me := os.Geteuid()
	real = path
	if t.Path {
		if real, err = resolveTrusted(path, me); err != nil {
			return nil, "", err
		}
	}
	fd, err := ignoringEINTR(func() (int, error) {
		return unix.Open(real, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		if errors.Is(err, unix.ELOOP) && !t.Path {
			return nil, "", &TrustError{Problem: TrustSymlink, Path: path, Kind: "file"}
		}
		return nil, "", &TrustError{Problem: TrustIO, Path: real, Kind: "file", Op: "open", Err: err}
	}
	f := os.NewFile(uintptr(fd), real)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, "", &TrustError{Problem: TrustIO, Path: real, Kind: "file", Op: "stat", Err: err}
	}
	perm := fs.FileMode(st.Mode & 0o777)
	fail := func(p TrustProblem) ([]byte, string, error) {
		return nil, "", &TrustError{Problem: p, Path: real, Kind: "file", UID: int(st.Uid), Mode: perm, Nlink: uint64(st.Nlink), Max: t.MaxBytes}
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fail(TrustNotRegular)
	case int(st.Uid) != me && st.Uid != 0:
		return fail(TrustOwner)
	case perm&t.Forbid&0o022 != 0:
		return fail(TrustWritable)
	case perm&t.Forbid != 0:
		return fail(TrustReadable)
	case t.Forbid&0o004 != 0 && st.Nlink != 1:
		return fail(TrustHardLinks)
	}
	data, err = io.ReadAll(io.LimitReader(f, t.MaxBytes+1))
	if err != nil {
		return nil, "", &TrustError{Problem: TrustIO, Path: real, Kind: "file", Op: "read", Err: err}
	}
	if int64(len(data)) > t.MaxBytes {
		return fail(TrustTooLarge)
	}
	return data, real, nil
}

// resolveTrusted resolves path like the kernel does (symlinks anywhere,
// ".." after them), checking each directory and symlink it passes
// through, and returns the resolved path of the last component (which it
// does not check).
func resolveTrusted(path string, me int) (string, error) {
	return WalkPath(path, func(s PathStep) error {
		if s.Link {
			if s.UID != me && s.UID != 0 {
				return &TrustError{Problem: TrustOwner, Path: s.Path, Kind: "symlink", UID: s.UID}
			}
			return nil
		}
		e := &TrustError{Path: s.Path, Kind: "directory", UID: s.UID, Mode: fs.FileMode(s.Mode & 0o777)}
		switch {
		case s.Mode&unix.S_IFMT != unix.S_IFDIR:
			e.Problem = TrustNotDir
		case s.UID != me && s.UID != 0:
			e.Problem = TrustOwner
		case s.OpenToOthers():
			e.Problem = TrustWritable
		default:
			return nil
		}
		return e
	})
}

// WalkPath resolves path like the kernel does (symbolic links anywhere,
// ".." after them, at most 40 links) and returns the resolved path of its
// last component, which it does not stat. It calls step, in order, for
// "/" and each directory a component is looked up in (a directory may
// come more than once), and for each symbolic link before it is
// followed; an error from step ends the walk. Whoever controls a step
// controls what the path names: this is the one walk of the checks that
// refuse a path someone else could redirect (ReadTrusted, and the
// config's workspace check as root). A failed lstat or readlink is a
// *TrustError (TrustIO), too many links one with TrustLinkLoop.
func WalkPath(path string, step func(PathStep) error) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", &TrustError{Problem: TrustIO, Path: path, Op: "abs", Err: err}
	}
	lstat := func(p, kind string) (unix.Stat_t, error) {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return st, &TrustError{Problem: TrustIO, Path: p, Kind: kind, Op: "lstat", Err: err}
		}
		return st, nil
	}
	resolved := "/"
	dirStep := func() error {
		st, err := lstat(resolved, "directory")
		if err == nil {
			err = step(PathStep{Path: resolved, UID: int(st.Uid), Mode: uint32(st.Mode)})
		}
		return err
	}
	if err := dirStep(); err != nil {
		return "", err
	}
	rest := strings.Split(abs, "/")
	for links := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			resolved = filepath.Dir(resolved)
			continue
		}
		if resolved != "/" { // "/" was the first step
			if err := dirStep(); err != nil {
				return "", err
			}
		}
		p := filepath.Join(resolved, c)
		st, err := lstat(p, "")
		if err != nil {
			return "", err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			if err := step(PathStep{Path: p, UID: int(st.Uid), Mode: uint32(st.Mode), Link: true}); err != nil {
				return "", err
			}
			if links++; links > 40 {
				return "", &TrustError{Problem: TrustLinkLoop, Path: path}
			}
			target, err := os.Readlink(p)
			if err != nil {
				return "", &TrustError{Problem: TrustIO, Path: p, Kind: "symlink", Op: "readlink", Err: err}
			}
			if filepath.IsAbs(target) {
				resolved = "/"
			}
			rest = append(strings.Split(target, "/"), rest...)
			continue
		}
		resolved = p
	}
	return resolved, nil
}
