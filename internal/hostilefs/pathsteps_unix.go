//go:build unix

package hostilefs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// PathSteps resolves the absolute path abs as the kernel would, one
// component at a time with lstat, and returns every directory whose
// entry it looks up and every symbolic link it follows, with what abs
// resolves to. It is a snapshot: the caller decides whether those who
// control the steps (their owners; for a directory, group or others when
// it is writable to them and not sticky) are trusted, and opens abs
// afterwards.
func PathSteps(abs string) (steps []PathStep, resolved string, err error) {
	resolved = "/"
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
		// The directory c is in is on the way (an entry of it names what
		// follows); so is a link.
		var dir unix.Stat_t
		if err := unix.Lstat(resolved, &dir); err != nil {
			return nil, "", &os.PathError{Op: "lstat", Path: resolved, Err: err}
		}
		steps = append(steps, PathStep{Path: resolved, UID: int(dir.Uid), Mode: uint32(dir.Mode)})
		p := filepath.Join(resolved, c)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return nil, "", &os.PathError{Op: "lstat", Path: p, Err: err}
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			steps = append(steps, PathStep{Path: p, UID: int(st.Uid), Mode: uint32(st.Mode), Link: true})
			if links++; links > 40 {
				return nil, "", fmt.Errorf("%s: too many levels of symbolic links", abs)
			}
			target, err := os.Readlink(p)
			if err != nil {
				return nil, "", err
			}
			if filepath.IsAbs(target) {
				resolved = "/"
			}
			rest = append(strings.Split(target, "/"), rest...)
			continue
		}
		resolved = p
	}
	return steps, resolved, nil
}
