package main

import (
	"errors"
	"fmt"
	"io"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/gates"
)

func newServeCmd(a *app) *cobra.Command {
	var stdio bool
	cmd := &cobra.Command{
		Use:   "serve --stdio",
		Short: "Serve the JSON-RPC protocol: a runtime in any language runs sandboxed processes and answers gates",
		Long: `Serve the gatebridge JSON-RPC protocol (docs/jsonrpc.md) on stdin and
stdout, one JSON object per line; logs go to stderr. A runtime opens
sandboxes, starts processes in them with streamed output, stdin and
signals, and registers gates that it answers itself.

Everything the connection started is stopped and removed when stdin
closes, and on SIGINT, SIGTERM or SIGHUP.`,
		Example: `  gatebridge serve --stdio
  python3 examples/agent_loop.py   # drives it with clients/python`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !stdio {
				return &usageError{withHint(errors.New("serve: choose a transport"), "pass --stdio")}
			}
			return a.serve(cmd)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&stdio, "stdio", false, "serve on stdin and stdout")
	f.String("image", "", "docker image (docker backend), when sandbox/open gives none")
	f.String("watch", "", "how the host notices calls: auto, events or poll")
	return needsConfig(cmd)
}

// serve runs one protocol connection on the command's stdin and stdout.
func (a *app) serve(cmd *cobra.Command) error {
	opts, closeAudit, err := a.rpcOptions(cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer closeAudit()
	// Caught, these signals end the connection (and everything it
	// started); and the commands it starts get them with their default
	// action even when gatebridge was started ignoring them (nohup, a
	// background job): a caught signal is reset at exec, an ignored one
	// is not.
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	return rpc.NewServer(opts).Serve(ctx, cmd.InOrStdin(), cmd.OutOrStdout())
}

// rpcOptions are the protocol server's options from the config (serve,
// mcp); the returned function closes the audit log.
func (a *app) rpcOptions(stderr io.Writer) (rpc.Options, func(), error) {
	cfg := a.cfg
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }
	var audit io.Writer
	closeAudit := func() {}
	if cfg.Audit.Path != "" {
		f, err := openAudit(cfg.Audit.Path, cfg.Audit.MaxBytes, cfg.Audit.MaxFiles)
		if err != nil {
			return rpc.Options{}, nil, &configError{Key: "audit.path", Msg: err.Error(), Hint: "the audit log must be a regular file you can write (not a symlink)"}
		}
		audit, closeAudit = f, func() { f.Close() }
	}
	approval := map[string]bool{}
	for _, c := range cfg.Gates.Commands {
		if c.Approval == "ask" {
			approval[c.Name] = true
		}
	}
	return rpc.Options{
		Backends:         a.backends,
		Settings:         backendSettings(cfg),
		AllowUnsandboxed: cfg.Sandbox.AllowUnsandboxed,
		Gates: func(workspace, inside string, writable bool) (*gates.Registry, map[string]string, error) {
			if err := serveCheckWorkspace(cfg, workspace, writable); err != nil {
				return nil, nil, err
			}
			return buildRegistry(cfg, workspace, inside, func(w string) { logf("gatebridge: warning: %s", w) })
		},
		ApprovalGates: approval,
		Bridge: bridge.Config{
			Dir:            cfg.Bridge.SessionDir,
			Limits:         limitsOf(cfg),
			Watch:          bridge.WatchMode(cfg.Bridge.Watch),
			PollInterval:   cfg.Bridge.PollInterval,
			RescanInterval: cfg.Bridge.RescanInterval,
			Audit:          audit,
			Logf:           logf,
		},
		Process: sandboxSpecTemplate(cfg),
		RunAs:   func(workspace string) (int, int) { return runAs(cfg, workspace) },
		Version: versionString(),
		Logf:    logf,
	}, closeAudit, nil
}

// serveCheckWorkspace refuses a sandbox whose workspace holds the config
// file, or, writable, the audit log: the sandboxed command could change
// what the next gatebridge reads or erase the record of what it did.
func serveCheckWorkspace(cfg *Config, workspace string, writable bool) error {
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
		return abs == workspace || strings.HasPrefix(abs, strings.TrimSuffix(workspace, "/")+"/")
	}
	if inside(cfg.configFile) {
		return &configError{Msg: fmt.Sprintf("refusing workspace %s: it holds gatebridge's config file %s, which the sandboxed command could read or change", workspace, cfg.configFile),
			Hint: "keep the config outside every workspace, e.g. in $XDG_CONFIG_HOME/gatebridge/gatebridge.yaml"}
	}
	if writable && inside(filepath.Dir(cfg.Audit.Path)) && cfg.Audit.Path != "" {
		return &configError{Key: "audit.path", Msg: fmt.Sprintf("refusing writable workspace %s: it holds the audit log %s, which the sandboxed command could rewrite", workspace, cfg.Audit.Path),
			Hint: "put the audit log outside every workspace"}
	}
	return nil
}
