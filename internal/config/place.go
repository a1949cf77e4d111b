package config

import (
	"fmt"
	"path/filepath"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/internal/fspath"
	"github.com/gatebridge/gatebridge/sandbox"
)

// Reused is what the place checks need of a persistent sandbox a command
// runs in (sandbox.docker.reuse): its name, its workspace and sessions
// root as the host sees them (symlinks resolved; "" when unknown), and
// how it maps host paths into it (nil when it does not say).
type Reused struct {
	Name, Workspace, SessionsRoot string
	Mapper                        sandbox.WorkspaceMapper
}

// CheckAuditPlace refuses an audit log the sandboxed command could write
// (and so rewrite or truncate, or fill with rotated files): inside a
// writable workspace, gates.writable_root, the session directory, or a
// persistent sandbox's sessions root or workspace.
func (cfg *Config) CheckAuditPlace(workspace string, r Reused) error {
	dir, err := filepath.Abs(filepath.Dir(cfg.Audit.Path))
	if err != nil {
		return nil // auditlog.Open reports it
	}
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		dir = r
	}
	sessions := cfg.Bridge.SessionDir
	if sessions == "" {
		sessions = bridge.DefaultParent()
	}
	places := []struct{ dir, key string }{
		{cfg.Gates.WritableRoot, "gates.writable_root"},
		{sessions, "bridge.session_dir"},
		{r.SessionsRoot, "the persistent sandbox's sessions root"},
		// Whether it was started writable is not known here: refuse.
		{r.Workspace, "the persistent sandbox's workspace"},
	}
	if cfg.Sandbox.WritableWorkspace {
		places = append(places, struct{ dir, key string }{workspace, "sandbox.workspace, writable"})
	}
	for _, p := range places {
		if p.dir == "" {
			continue
		}
		d, err := filepath.Abs(p.dir)
		if err != nil {
			continue
		}
		if r, err := filepath.EvalSymlinks(d); err == nil {
			d = r
		}
		if fspath.Within(dir, d) {
			return &Error{Key: "audit.path", Msg: fmt.Sprintf("%s is inside %s (%s), which the sandboxed command can write", cfg.Audit.Path, d, p.key),
				Help: "keep the audit log outside what the sandbox can write, e.g. under $XDG_STATE_HOME"}
		}
	}
	return nil
}

// CheckPlaceInSandbox refuses the config file (configFile, resolved;
// configGiven as named) when a reused persistent sandbox can reach it: a persistent docker sandbox has the workspace and sessions
// root it was started with, not the ones of this invocation.
func (cfg *Config) CheckPlaceInSandbox(configFile, configGiven string, r Reused) error {
	if configFile == "" {
		return nil
	}
	refuse := func(dir, what string) error {
		return &Error{Msg: fmt.Sprintf("refusing config file %s: it is inside %s (%s), which the sandboxed command can read or write", configFile, dir, what),
			Help: "keep the config outside the workspace, e.g. in $XDG_CONFIG_HOME/gatebridge/gatebridge.yaml, and pass it with --config"}
	}
	if sb := r.Mapper; sb != nil {
		// The sandbox's workspace path is as given at start (symlinks
		// not resolved): try both spellings of the config's path.
		for _, p := range []string{configFile, configGiven} {
			if _, ok := sb.WorkspaceInside(p); ok {
				return refuse("the workspace", "of persistent sandbox "+r.Name)
			}
		}
	}
	if ws := r.Workspace; ws != "" && fspath.Within(configFile, ws) {
		return refuse(ws, "the workspace of persistent sandbox "+r.Name)
	}
	if root := r.SessionsRoot; root != "" {
		if r, err := filepath.EvalSymlinks(root); err == nil {
			root = r
		}
		if fspath.Within(configFile, root) {
			return refuse(root, "the sessions root of persistent sandbox "+r.Name)
		}
	}
	return nil
}

// CheckServeWorkspace refuses a sandbox whose workspace holds the grants
// file, the config file (configFile), or, writable, the audit log: the sandboxed command could change
// what the next gatebridge reads or erase the record of what it did. As
// root it refuses a workspace whose path another user controls too
// (CheckWorkspacePath).
func (cfg *Config) CheckServeWorkspace(workspace string, writable bool, configFile string) error {
	if store, err := cfg.GrantsStore(); err != nil {
		return err
	} else if err := store.Inside(workspace); err != nil {
		return err
	}
	inside := func(p string) bool {
		if p == "" {
			return false
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return false
		}
		if r, err := filepath.EvalSymlinks(abs); err == nil {
			abs = r
		}
		return fspath.Within(abs, workspace)
	}
	if err := CheckWorkspacePath(workspace); err != nil {
		return err
	}
	if inside(configFile) {
		return &Error{Msg: fmt.Sprintf("refusing workspace %s: it holds gatebridge's config file %s, which the sandboxed command could read or change", workspace, configFile),
			Help: "keep the config outside every workspace, e.g. in $XDG_CONFIG_HOME/gatebridge/gatebridge.yaml"}
	}
	if writable && inside(filepath.Dir(cfg.Audit.Path)) && cfg.Audit.Path != "" {
		return &Error{Key: "audit.path", Msg: fmt.Sprintf("refusing writable workspace %s: it holds the audit log %s, which the sandboxed command could rewrite", workspace, cfg.Audit.Path),
			Help: "put the audit log outside every workspace"}
	}
	return nil
}

// WorkspaceInReused is the workspace a command works in: workspace, but
// in a reused persistent sandbox (r) run from outside its workspace with none given
// (sandbox exec NAME from elsewhere) the sandbox's own; a workspace given
// outside it is refused with a hint naming it.
func (cfg *Config) WorkspaceInReused(workspace string, r Reused) (string, error) {
	sw := r.Workspace
	if sw == "" {
		return workspace, nil
	}
	ws := workspace
	if r, err := filepath.EvalSymlinks(ws); err == nil {
		ws = r
	}
	switch {
	case fspath.Within(ws, sw):
		return workspace, nil
	case cfg.Sandbox.Workspace == "":
		return sw, CheckWorkspacePath(sw)
	}
	return "", &Error{Key: "sandbox.workspace", Msg: fmt.Sprintf("%s is not under the persistent sandbox's workspace %s", workspace, sw),
		Help: "pass --workspace " + sw + " (or a directory under it), or leave --workspace out to work there"}
}
