package main

import (
	"fmt"
	"path/filepath"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/internal/fspath"
)

// checkAuditPlace refuses an audit log the sandboxed command could write
// (and so rewrite or truncate, or fill with rotated files): inside a
// writable workspace, gates.writable_root, the session directory, or a
// persistent sandbox's sessions root or workspace.
func checkAuditPlace(cfg *Config, workspace string, chosen *chosenBackend) error {
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
		{chosen.sessionsRoot, "the persistent sandbox's sessions root"},
		// Whether it was started writable is not known here: refuse.
		{chosen.reuseWorkspace, "the persistent sandbox's workspace"},
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
			return &configError{Key: "audit.path", Msg: fmt.Sprintf("%s is inside %s (%s), which the sandboxed command can write", cfg.Audit.Path, d, p.key),
				Help: "keep the audit log outside what the sandbox can write, e.g. under $XDG_STATE_HOME"}
		}
	}
	return nil
}
