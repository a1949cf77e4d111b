package config

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/internal/hostilefs"
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
	var steps []hostilefs.PathStep
	resolved, err := hostilefs.WalkPath(abs, func(s hostilefs.PathStep) error {
		steps = append(steps, s)
		return nil
	})
	if err != nil {
		return err
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
		if seen[s.Path] {
			continue
		}
		seen[s.Path] = true
		what := "directory " + s.Path
		if s.Link {
			what = "symbolic link " + s.Path
		}
		if s.Stat.Uid != 0 && s.Stat.Uid != owner {
			return refuse(fmt.Sprintf("the %s on the way is owned by uid %d, who could put any directory there", what, s.Stat.Uid))
		}
		if !s.Link && s.Stat.Mode&0o022 != 0 && s.Stat.Mode&unix.S_ISVTX == 0 {
			return refuse(fmt.Sprintf("the %s on the way is writable by group or others (mode %v, not sticky), who could put any directory there", what, os.FileMode(s.Stat.Mode&0o777)))
		}
	}
	return nil
}
