package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/internal/fspath"
	"github.com/gatebridge/gatebridge/sandbox/docker"
)

// maxConfigBytes caps what is read of a config file.
const maxConfigBytes = 4 << 20

// readTrustedConfig reads a config file that only the invoker (or root)
// could have written, and returns its contents and its resolved path. A
// config defines host commands: whoever can write it runs code as us.
//
// The path is resolved one component at a time. Every directory on the
// way (those of the path as given and of every symlink target) must be
// owned by us or root and not writable by group or others unless it is
// sticky (/tmp); every symlink on the way must be owned by us or root
// (its owner can point it anywhere); the file itself must be a regular
// file owned by us or root with no group or other write bit. The file is
// then opened without following links and checked and read through that
// one descriptor, so it cannot be swapped between the check and the read.
func readTrustedConfig(path string) (data []byte, real string, err error) {
	me := uint32(os.Geteuid())
	real, err = resolveTrusted(path, me)
	if err != nil {
		return nil, "", err
	}
	fd, err := unix.Open(real, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, "", &configError{Msg: fmt.Sprintf("cannot read config file %s: %v", path, err),
			Help: "pass an existing file to --config"}
	}
	f := os.NewFile(uintptr(fd), real)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, "", &configError{Msg: fmt.Sprintf("cannot read config file %s: %v", path, err)}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, "", &configError{Msg: fmt.Sprintf("config file %s is not a regular file", path),
			Help: "pass a regular file to --config"}
	}
	if err := trustedOwner("config file "+path, st.Uid, me); err != nil {
		return nil, "", err
	}
	if st.Mode&0o022 != 0 {
		return nil, "", &configError{Msg: fmt.Sprintf("refusing config file %s: writable by group or others (mode %v), so another user could define host commands", path, os.FileMode(st.Mode&0o777)),
			Help: "chmod go-w " + real}
	}
	data, err = io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, "", &configError{Msg: fmt.Sprintf("cannot read config file %s: %v", path, err)}
	}
	if len(data) > maxConfigBytes {
		return nil, "", &configError{Msg: fmt.Sprintf("config file %s is larger than %d bytes", path, maxConfigBytes)}
	}
	return data, real, nil
}

func trustedOwner(what string, uid, me uint32) error {
	if uid != 0 && uid != me {
		return &configError{Msg: fmt.Sprintf("refusing %s: owned by uid %d, not you (uid %d) or root, so that user could define host commands", what, uid, me),
			Help: "use a config file you own, in a directory only you can write"}
	}
	return nil
}

// resolveTrusted resolves path like the kernel does (symlinks anywhere,
// ".." after them), checking each directory and symlink it passes through,
// and returns the resolved path of the last component (not checked here).
func resolveTrusted(path string, me uint32) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", &configError{Msg: fmt.Sprintf("config file %s: %v", path, err)}
	}
	checkDir := func(dir string) error {
		var st unix.Stat_t
		if err := unix.Lstat(dir, &st); err != nil {
			return &configError{Msg: fmt.Sprintf("config file %s: %v", path, err)}
		}
		what := fmt.Sprintf("directory %s (above config file %s)", dir, path)
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return &configError{Msg: fmt.Sprintf("config file %s: %s is not a directory", path, dir)}
		}
		if err := trustedOwner(what, st.Uid, me); err != nil {
			return err
		}
		if st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0 {
			return &configError{Msg: fmt.Sprintf("refusing %s: writable by group or others (mode %v), so another user could replace the config", what, os.FileMode(st.Mode&0o777)),
				Help: "chmod go-w " + dir}
		}
		return nil
	}
	if err := checkDir("/"); err != nil {
		return "", err
	}
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
		p := filepath.Join(resolved, c)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return "", &configError{Msg: fmt.Sprintf("cannot read config file %s: %v", path, err),
				Help: "pass an existing file to --config"}
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			if err := trustedOwner(fmt.Sprintf("symlink %s (on the way to config file %s)", p, path), st.Uid, me); err != nil {
				return "", err
			}
			if links++; links > 40 {
				return "", &configError{Msg: fmt.Sprintf("config file %s: too many levels of symbolic links", path)}
			}
			target, err := os.Readlink(p)
			if err != nil {
				return "", &configError{Msg: fmt.Sprintf("config file %s: %v", path, err)}
			}
			if filepath.IsAbs(target) {
				resolved = "/"
			}
			rest = append(strings.Split(target, "/"), rest...)
			continue
		}
		if remaining(rest) {
			if err := checkDir(p); err != nil {
				return "", err
			}
		}
		resolved = p
	}
	return resolved, nil
}

// remaining reports whether rest still names a component.
func remaining(rest []string) bool {
	for _, c := range rest {
		if c != "" && c != "." {
			return true
		}
	}
	return false
}

// checkConfigPlace refuses a config file (real: its resolved path) inside a
// directory the sandbox can read or write: the workspace, gates.root,
// gates.writable_root, the session directory or a persistent sandbox's
// sessions root. A read-only workspace is refused too: it is often an
// untrusted checkout.
func checkConfigPlace(path, real string, cfg *Config) error {
	ws := cfg.Sandbox.Workspace
	if ws == "" {
		ws, _ = os.Getwd()
	}
	sessions := cfg.Bridge.SessionDir
	if sessions == "" {
		sessions = bridge.DefaultParent()
	}
	for _, d := range []struct{ dir, key string }{
		{ws, "sandbox.workspace"},
		{cfg.Gates.WritableRoot, "gates.writable_root"},
		{cfg.Gates.Root, "gates.root"},
		{sessions, "bridge.session_dir"},
		{cfg.Sandbox.Docker.SessionsRoot, "sandbox.docker.sessions_root"},
	} {
		if d.dir == "" {
			continue
		}
		dir, err := filepath.EvalSymlinks(d.dir)
		if err != nil {
			dir = filepath.Clean(d.dir)
		}
		dir, _ = filepath.Abs(dir)
		if fspath.Within(real, dir) {
			return &configError{Msg: fmt.Sprintf("refusing config file %s: it is inside %s (%s), which the sandboxed command can read or write", path, dir, d.key),
				Help: "keep the config outside the workspace, e.g. in $XDG_CONFIG_HOME/gatebridge/gatebridge.yaml, and pass it with --config"}
		}
	}
	return nil
}

// checkConfigPlaceSandbox refuses the config when the chosen sandbox can
// reach it: a persistent docker sandbox has the workspace and sessions
// root it was started with, not the ones of this invocation.
func checkConfigPlaceSandbox(cfg *Config, chosen *chosenBackend) error {
	if cfg.configFile == "" {
		return nil
	}
	refuse := func(dir, what string) error {
		return &configError{Msg: fmt.Sprintf("refusing config file %s: it is inside %s (%s), which the sandboxed command can read or write", cfg.configFile, dir, what),
			Help: "keep the config outside the workspace, e.g. in $XDG_CONFIG_HOME/gatebridge/gatebridge.yaml, and pass it with --config"}
	}
	if sb, ok := chosen.backend.(*docker.Sandbox); ok {
		// The sandbox's workspace path is as given at start (symlinks
		// not resolved): try both spellings of the config's path.
		for _, p := range []string{cfg.configFile, cfg.configGiven} {
			if _, ok := sb.WorkspaceInside(p); ok {
				return refuse("the workspace", "of persistent sandbox "+cfg.Sandbox.Docker.Reuse)
			}
		}
	}
	if ws := chosen.reuseWorkspace; ws != "" && fspath.Within(cfg.configFile, ws) {
		return refuse(ws, "the workspace of persistent sandbox "+cfg.Sandbox.Docker.Reuse)
	}
	if root := chosen.sessionsRoot; root != "" {
		if r, err := filepath.EvalSymlinks(root); err == nil {
			root = r
		}
		if fspath.Within(cfg.configFile, root) {
			return refuse(root, "the sessions root of persistent sandbox "+cfg.Sandbox.Docker.Reuse)
		}
	}
	return nil
}
