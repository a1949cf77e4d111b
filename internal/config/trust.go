package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/internal/fspath"
	"github.com/gatebridge/gatebridge/internal/hostilefs"
)

// maxConfigBytes caps what is read of a config file.
const maxConfigBytes = 4 << 20

// ReadTrusted reads a config file that only the invoker (or root)
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
// one descriptor, so it cannot be swapped between the check and the read
// (hostilefs.ReadTrusted; the messages are worded here).
func ReadTrusted(path string) (data []byte, real string, err error) {
	data, real, err = hostilefs.ReadTrusted(path, hostilefs.Trust{MaxBytes: maxConfigBytes, Forbid: 0o022, Path: true})
	var te *hostilefs.TrustError
	if err == nil || !errors.As(err, &te) {
		return data, real, err
	}
	existing := "pass an existing file to --config"
	switch te.Problem {
	case hostilefs.TrustIO:
		if te.Op == "open" || te.Op == "lstat" && te.Kind == "" {
			return nil, "", &Error{Msg: fmt.Sprintf("cannot read config file %s: %v", path, te.Err), Help: existing}
		}
		if te.Op == "stat" || te.Op == "read" {
			return nil, "", &Error{Msg: fmt.Sprintf("cannot read config file %s: %v", path, te.Err)}
		}
		return nil, "", &Error{Msg: fmt.Sprintf("config file %s: %v", path, te.Err)}
	case hostilefs.TrustNotRegular:
		return nil, "", &Error{Msg: fmt.Sprintf("config file %s is not a regular file", path), Help: "pass a regular file to --config"}
	case hostilefs.TrustNotDir:
		return nil, "", &Error{Msg: fmt.Sprintf("config file %s: %s is not a directory", path, te.Path)}
	case hostilefs.TrustLinkLoop:
		return nil, "", &Error{Msg: fmt.Sprintf("config file %s: too many levels of symbolic links", path)}
	case hostilefs.TrustOwner:
		what := "config file " + path
		switch te.Kind {
		case "directory":
			what = fmt.Sprintf("directory %s (above config file %s)", te.Path, path)
		case "symlink":
			what = fmt.Sprintf("symlink %s (on the way to config file %s)", te.Path, path)
		}
		return nil, "", &Error{Msg: fmt.Sprintf("refusing %s: owned by uid %d, not you (uid %d) or root, so that user could define host commands", what, te.UID, os.Geteuid()),
			Help: "use a config file you own, in a directory only you can write"}
	case hostilefs.TrustWritable:
		if te.Kind == "directory" {
			return nil, "", &Error{Msg: fmt.Sprintf("refusing directory %s (above config file %s): writable by group or others (mode %v), so another user could replace the config", te.Path, path, te.Mode),
				Help: "chmod go-w " + te.Path}
		}
		return nil, "", &Error{Msg: fmt.Sprintf("refusing config file %s: writable by group or others (mode %v), so another user could define host commands", path, te.Mode),
			Help: "chmod go-w " + te.Path}
	case hostilefs.TrustTooLarge:
		return nil, "", &Error{Msg: fmt.Sprintf("config file %s is larger than %d bytes", path, maxConfigBytes)}
	}
	return nil, "", &Error{Msg: fmt.Sprintf("config file %s: %v", path, err)}
}

// CheckPlace refuses the config file path (real: its resolved path) of c
// inside a directory the sandbox can read or write: the workspace, gates.root,
// gates.writable_root, the session directory or a persistent sandbox's
// sessions root. A read-only workspace is refused too: it is often an
// untrusted checkout.
func (cfg *Config) CheckPlace(path, real string) error {
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
			return &Error{Msg: fmt.Sprintf("refusing config file %s: it is inside %s (%s), which the sandboxed command can read or write", path, dir, d.key),
				Help: "keep the config outside the workspace, e.g. in $XDG_CONFIG_HOME/gatebridge/gatebridge.yaml, and pass it with --config"}
		}
	}
	return nil
}
