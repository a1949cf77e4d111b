package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// CheckWorkspacePath refuses, when gatebridge is root, a workspace whose
// path someone other than root and the workspace's owner controls: a
// symbolic link on the way owned by another user, or a directory on the
// way owned by another user or writable by group or others (not sticky).
//
// As root, gatebridge runs the command as the workspace's owner and its
// gates as root. Whoever controls the path chooses that owner and what
// root's gates see: alice, owning /home/alice, made proj a link to bob's
// home, and a root `gatebridge run --workspace /home/alice/proj` ran her
// command as bob, in bob's home (or, with a link to /etc, root's gates
// on /etc). The owner may still move things about in her own directories:
// she can then point the workspace only at what she controls anyway, and
// the gates keep to the directory they started on (see gates.workspace).
func CheckWorkspacePath(workspace string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	abs, err := filepath.Abs(workspace)
	if err != nil {
		return err
	}
	type step struct {
		path string
		st   unix.Stat_t
		link bool
	}
	var steps []step
	resolved := "/"
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
			return err
		}
		steps = append(steps, step{path: resolved, st: dir})
		p := filepath.Join(resolved, c)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			steps = append(steps, step{path: p, st: st, link: true})
			if links++; links > 40 {
				return fmt.Errorf("%s: too many levels of symbolic links", workspace)
			}
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if filepath.IsAbs(target) {
				resolved = "/"
			}
			rest = append(strings.Split(target, "/"), rest...)
			continue
		}
		resolved = p
	}
	var ws unix.Stat_t
	if err := unix.Stat(resolved, &ws); err != nil {
		return err
	}
	owner := ws.Uid
	refuse := func(msg string) error {
		return &Error{Key: "sandbox.workspace",
			Msg:  fmt.Sprintf("refusing workspace %s: %s; as root, gatebridge runs the command as the workspace's owner (uid %d) and its gates as root, so whoever controls the path chooses whose files the command gets and what root's gates read and write", workspace, msg, owner),
			Help: "pass a workspace whose path only root and its owner can change (no link or directory of another user on the way, none writable by group or others unless sticky)"}
	}
	seen := map[string]bool{}
	for _, s := range steps {
		if seen[s.path] {
			continue
		}
		seen[s.path] = true
		what := "directory " + s.path
		if s.link {
			what = "symbolic link " + s.path
		}
		if s.st.Uid != 0 && s.st.Uid != owner {
			return refuse(fmt.Sprintf("the %s on the way is owned by uid %d, who could put any directory there", what, s.st.Uid))
		}
		if !s.link && s.st.Mode&0o022 != 0 && s.st.Mode&unix.S_ISVTX == 0 {
			return refuse(fmt.Sprintf("the %s on the way is writable by group or others (mode %v, not sticky), who could put any directory there", what, os.FileMode(s.st.Mode&0o777)))
		}
	}
	return nil
}
