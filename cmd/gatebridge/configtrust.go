package main

import (
	"fmt"
	"path/filepath"

	"github.com/gatebridge/gatebridge/internal/fspath"
	"github.com/gatebridge/gatebridge/sandbox/docker"
)

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
