package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/gatebridge/gatebridge/bridge"
)

// checkConfigFile refuses a config file that someone other than the
// invoker (or root) could have written: the file itself (symlinks
// followed) must be a regular file owned by us or root with no group or
// other write bit, and every directory above it must be owned by us or
// root and not writable by group or others unless it is sticky (/tmp).
// A config defines host commands: whoever can write it runs code as us.
func checkConfigFile(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return &configError{Msg: fmt.Sprintf("config file %s: %v", path, err)}
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return &configError{Msg: fmt.Sprintf("cannot read config file %s: %v", path, err),
			Hint: "pass an existing file to --config"}
	}
	fi, err := os.Stat(real)
	if err != nil {
		return &configError{Msg: fmt.Sprintf("cannot read config file %s: %v", path, err)}
	}
	if !fi.Mode().IsRegular() {
		return &configError{Msg: fmt.Sprintf("config file %s is not a regular file", path)}
	}
	me := uint32(os.Geteuid())
	for p := real; ; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		if err != nil {
			return &configError{Msg: fmt.Sprintf("config file %s: %v", path, err)}
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			break
		}
		what := "config file " + path
		if p != real {
			what = fmt.Sprintf("directory %s (above config file %s)", p, path)
		}
		if st.Uid != 0 && st.Uid != me {
			return &configError{Msg: fmt.Sprintf("refusing %s: owned by uid %d, not you (uid %d) or root, so that user could define host commands", what, st.Uid, me),
				Hint: "use a config file you own, in a directory only you can write"}
		}
		if fi.Mode().Perm()&0o022 != 0 && !(fi.IsDir() && fi.Mode()&os.ModeSticky != 0) {
			return &configError{Msg: fmt.Sprintf("refusing %s: writable by group or others (mode %v), so another user could define host commands", what, fi.Mode().Perm()),
				Hint: "chmod go-w " + p}
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	return nil
}

// checkConfigPlace refuses a config file inside a directory the sandbox can
// write: the workspace (when writable, or when write_file may write it),
// the writable root or the session directory. A read-only workspace is
// refused too: it is often an untrusted checkout.
func checkConfigPlace(path string, cfg *Config) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil // checkConfigFile already read it; a race is not ours to judge
	}
	real, _ = filepath.Abs(real)
	ws := cfg.Sandbox.Workspace
	if ws == "" {
		ws, _ = os.Getwd()
	}
	sessions := cfg.Bridge.SessionDir
	if sessions == "" {
		sessions = bridge.DefaultDir()
	}
	for _, d := range []struct{ dir, key string }{
		{ws, "sandbox.workspace"},
		{cfg.Gates.WritableRoot, "gates.writable_root"},
		{cfg.Gates.Root, "gates.root"},
		{sessions, "bridge.session_dir"},
	} {
		if d.dir == "" {
			continue
		}
		dir, err := filepath.EvalSymlinks(d.dir)
		if err != nil {
			dir = filepath.Clean(d.dir)
		}
		dir, _ = filepath.Abs(dir)
		if real == dir || strings.HasPrefix(real, strings.TrimSuffix(dir, "/")+"/") {
			return &configError{Msg: fmt.Sprintf("refusing config file %s: it is inside %s (%s), which the sandboxed command can read or write", path, dir, d.key),
				Hint: "keep the config outside the workspace, e.g. in $XDG_CONFIG_HOME/gatebridge/gatebridge.yaml, and pass it with --config"}
		}
	}
	return nil
}
