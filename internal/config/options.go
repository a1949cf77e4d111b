package config

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/internal/auditlog"
	"github.com/gatebridge/gatebridge/sandbox"
)

// What the config gives each package's options; cmd/gatebridge maps the
// rest, where the options need more than the config.

// SpecTemplate is what every command's Spec takes from the config.
func (cfg *Config) SpecTemplate() sandbox.Spec {
	return sandbox.Spec{
		Timeout:        cfg.Sandbox.Timeout,
		KillGrace:      cfg.Sandbox.KillGrace,
		MaxOutput:      cfg.Sandbox.MaxOutput,
		Limits:         cfg.SandboxLimits(),
		ProtectedPaths: cfg.Sandbox.ProtectedPaths,
		AllowRoot:      cfg.Sandbox.AllowRoot,
	}
}

// SandboxLimits are the command's resources (sandbox.limits).
func (cfg *Config) SandboxLimits() sandbox.Limits {
	l := cfg.Sandbox.Limits
	return sandbox.Limits{Memory: l.Memory, CPUs: l.CPUs, Pids: l.Pids, TmpSize: l.TmpSize}
}

// RunAs is the host identity a sandboxed command gets when gatebridge is
// root: the workspace's owner when that is not root, else sandbox.uid/gid
// (65534 by default). A workspace whose group is root's (gid 0) gives
// sandbox.gid instead: in group 0 the command could leave a setgid-root
// file in a writable workspace for any host user to run. Not root,
// gatebridge runs commands as itself.
func (cfg *Config) RunAs(workspace string) (uid, gid int) {
	if os.Geteuid() != 0 {
		return os.Geteuid(), os.Getegid()
	}
	if st, err := os.Stat(workspace); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid != 0 {
			if sys.Gid == 0 && !cfg.Sandbox.AllowRoot {
				return int(sys.Uid), cfg.Sandbox.GID
			}
			return int(sys.Uid), int(sys.Gid)
		}
	}
	return cfg.Sandbox.UID, cfg.Sandbox.GID
}

// BridgeLimits are the mailbox's and gate calls' limits (bridge.limits).
func (cfg *Config) BridgeLimits() bridge.Limits {
	l := cfg.Bridge.Limits
	return bridge.Limits{
		MaxCalls: l.MaxCalls, MaxConcurrent: l.MaxConcurrent, MaxArgs: l.MaxArgs,
		MaxArgBytes: l.MaxArgBytes, MaxStdinBytes: l.MaxStdinBytes, MaxOutputBytes: l.MaxOutputBytes,
		GateTimeout: l.GateTimeout, MaxScanEntries: l.MaxScanEntries,
		MaxSessionBytes: l.MaxSessionBytes, MaxRecords: l.MaxRecords, MaxRecordBytes: l.MaxRecordBytes,
	}
}

// LimitKey is the config key of a limit of bridge.Limits, named by its
// JSON name: what the messages about it name.
func LimitKey(limit string) string { return "bridge.limits." + limit }

// UntrustedDirs are where the sandbox can write (the workspace, the
// writable root, the session directories): no gate's program, secret
// file or CA file may come from there.
func (cfg *Config) UntrustedDirs(workspace string) []string {
	sessions := cfg.Bridge.SessionDir
	if sessions == "" {
		sessions = bridge.DefaultDir()
	}
	return []string{workspace, cfg.Gates.WritableRoot, sessions, cfg.Sandbox.Docker.SessionsRoot}
}

// BuiltinOptions are the built-in gates' settings; with no gates.root,
// the builtin kind gives them the workspace.
func (cfg *Config) BuiltinOptions() gates.Options {
	return gates.Options{
		Root:               cfg.Gates.Root,
		WritableRoot:       cfg.Gates.WritableRoot,
		MaxFileBytes:       cfg.Gates.MaxFileBytes,
		MaxSearchMatches:   cfg.Gates.MaxSearchMatches,
		MaxSearchFiles:     cfg.Gates.MaxSearchFiles,
		MaxSearchFileBytes: cfg.Gates.MaxSearchFileBytes,
		ProtectedPaths:     cfg.Sandbox.ProtectedPaths,
	}
}

// Spec is one command gate's settings; the command kind adds the
// directories the sandbox can write to Untrusted.
func (c CommandConfig) Spec() gates.CommandSpec {
	spec := gates.CommandSpec{
		Name: c.Name, Summary: c.Summary, Command: c.Command, AllowArgs: c.AllowArgs,
		AllowPattern: c.AllowPattern, EndOfOptions: c.EndOfOptions, Home: c.Home,
		Dir: c.Dir, Timeout: c.Timeout, MaxOutputBytes: c.MaxOutputBytes,
		Env: c.Env, Stdin: c.Stdin, Isolate: c.Isolate.Spec(),
	}
	for _, a := range c.Args {
		spec.Args = append(spec.Args, gates.ArgRule{Name: a.Name, Pattern: a.Pattern, Optional: a.Optional, Variadic: a.Variadic, Max: a.Max})
	}
	for _, o := range c.Options {
		spec.Options = append(spec.Options, gates.OptionRule{Name: o.Name, Value: o.Value})
	}
	return spec
}

// ResolveWorkspace is sandbox.workspace (ws; the current directory
// when empty) made absolute; it must be a directory.
func ResolveWorkspace(ws string) (string, error) {
	if ws == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		ws = wd
	}
	abs, err := filepath.Abs(ws)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(abs)
	if err != nil || !st.IsDir() {
		return "", &Error{Key: "sandbox.workspace", Msg: fmt.Sprintf("%s is not a directory", abs),
			Help: "pass an existing directory to --workspace"}
	}
	return abs, nil
}

// SessionConfig is a session's config from the bridge section; the
// caller adds the gates, the audit log, the redactor, the log and the
// approval hook (and Keep, for run).
func (cfg *Config) SessionConfig() bridge.Config {
	return bridge.Config{
		Dir:            cfg.Bridge.SessionDir,
		Limits:         cfg.BridgeLimits(),
		Watch:          bridge.WatchMode(cfg.Bridge.Watch),
		PollInterval:   cfg.Bridge.PollInterval,
		RescanInterval: cfg.Bridge.RescanInterval,
		SubmitLines:    cfg.Bridge.SubmitLines,
		LimitKey:       LimitKey,
	}
}

// OpenAudit opens the audit log (audit.path, which must be set); an
// error names the key.
func (cfg *Config) OpenAudit() (*auditlog.Log, error) {
	f, err := auditlog.Open(cfg.Audit.Path, cfg.Audit.MaxBytes, cfg.Audit.MaxFiles)
	if err != nil {
		return nil, &Error{Key: "audit.path", Msg: err.Error(), Help: "the audit log must be a regular file you can write (not a symlink)"}
	}
	return f, nil
}
