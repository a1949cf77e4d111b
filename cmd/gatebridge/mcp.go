package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/gatebridge/gatebridge/bridge/mcpserver"
	"github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/internal/config"
	"github.com/gatebridge/gatebridge/internal/trust"
)

func newMCPCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp [--http ADDR --token-file FILE]",
		Short: "Serve MCP on stdio: one bash tool that runs in a sandbox with every gate on its PATH",
		Long: `Serve the Model Context Protocol on stdin and stdout with one tool, bash:
it runs a command line in a sandbox (one per MCP session: files persist
between calls, shell state does not) where every gate is a command. The
tool's description lists the gates, so a model needs nothing else.
policy.commands decides each command line before it starts.

The sandbox is opened when the server starts, so a backend that cannot
run here fails at once. Everything is stopped and removed when the client
disconnects.

--http ADDR serves streamable HTTP instead, one sandbox per MCP session
(at most mcp.sessions.max_sandboxes at once; one idle for
mcp.sessions.idle_timeout is closed). --token-file is required, on
loopback too: anyone who reaches the port would run commands as you.
Clients send Authorization: Bearer TOKEN.`,
		Example: `  gatebridge mcp --sandbox bwrap --workspace ~/src/project
  gatebridge mcp --sandbox docker --writable-workspace
  gatebridge mcp --http 127.0.0.1:8765 --token-file ~/.config/gatebridge/token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.mcp(cmd) },
	}
	f := cmd.Flags()
	f.String("sandbox", autoBackend, "sandbox backend: "+config.BackendChoices(a.backends))
	f.String("workspace", "", "directory the commands start in and the gates see (default: current directory)")
	f.Bool("writable-workspace", false, "let the sandbox write the workspace (bwrap, docker)")
	f.String("image", "", "docker image (docker backend; config sandbox.docker.image)")
	f.String("runtime", "", "OCI runtime of the docker engine, e.g. runsc (docker backend; config sandbox.docker.runtime)")
	f.Duration("timeout", 0, "default time limit of one bash call (config sandbox.timeout, 10m)")
	f.String("http", "", "serve streamable HTTP on ADDR (host:port) instead of stdio: one sandbox per MCP session")
	f.String("token-file", "", "with --http (required): clients must send 'Authorization: Bearer TOKEN', TOKEN read from this file (at least 32 bytes: openssl rand -hex 32)")
	return needsConfig(cmd)
}

// checkMCPFlags checks --http and --token-file together, before anything
// is opened.
func checkMCPFlags(addr, tokenFile string) error {
	usage := func(msg, hint string) error { return &usageError{withHint(errors.New("mcp: "+msg), hint)} }
	switch {
	case addr == "" && tokenFile != "":
		return usage("--token-file needs --http", "stdio needs no token: the client started this process")
	case addr == "":
		return nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return usage(fmt.Sprintf("--http %q: %v", addr, err), "give host:port, e.g. 127.0.0.1:8765")
	}
	if tokenFile == "" {
		// On loopback too: every local user reaches a loopback port, and
		// would drive the gates and the sandbox as the invoker.
		return usage("--http needs --token-file: anyone who reaches "+addr+" could run commands as you",
			"put a random token in a file only you can read (openssl rand -hex 32 > token; chmod 600 token); clients send Authorization: Bearer TOKEN")
	}
	return nil
}

// mcp serves MCP on stdio, or on streamable HTTP with --http.
func (a *app) mcp(cmd *cobra.Command) error {
	addr, _ := cmd.Flags().GetString("http")
	tokenFile, _ := cmd.Flags().GetString("token-file")
	if err := checkMCPFlags(addr, tokenFile); err != nil {
		return err
	}
	cfg := a.cfg
	workspace, err := config.ResolveWorkspace(cfg.Sandbox.Workspace)
	if err != nil {
		return err
	}
	opts, closeAudit, err := a.rpcOptions(cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer closeAudit()
	if addr != "" {
		// A sandbox that could read the token could connect as a client:
		// neither its workspace nor a directory its gates read may hold it.
		places := append(trust.ReachableOf(&cfg.Config), trust.Reachable{What: "sandbox.workspace", Path: workspace})
		if err := trust.Guard(&opts, places, []trust.SecretFile{{Flag: "--token-file", Path: tokenFile}}); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	srv := mcpserver.New(mcpserver.Options{Control: opts.Options,
		Backend: cfg.Sandbox.Backend, Workspace: workspace, Writable: cfg.Sandbox.WritableWorkspace,
		Timeout: cfg.Sandbox.Timeout, MaxOutput: cfg.Sandbox.MaxOutput,
		MaxBackground: cfg.MCP.Sessions.MaxBackground, MaxBackgroundBytes: cfg.MCP.Sessions.MaxBackgroundBytes,
		Policy: cfg.policy, Version: versionString()})
	if addr != "" {
		return serveMCPHTTP(ctx, srv, mcpserver.HTTPOptions{Addr: addr, MaxSandboxes: cfg.MCP.Sessions.MaxSandboxes,
			IdleTimeout: cfg.MCP.Sessions.IdleTimeout}, tokenFile, cmd.ErrOrStderr())
	}
	return srv.Serve(ctx, &mcp.StdioTransport{})
}

// serveMCPHTTP checks --http and --token-file, reads the token and serves
// streamable HTTP.
func serveMCPHTTP(ctx context.Context, srv *mcpserver.Server, ho mcpserver.HTTPOptions, tokenFile string, stderr io.Writer) error {
	if err := checkMCPFlags(ho.Addr, tokenFile); err != nil {
		return err
	}
	token, err := trust.LoadToken("mcp", tokenFile)
	if err != nil {
		return err
	}
	ho.Token = token
	if host, _, _ := net.SplitHostPort(ho.Addr); !rpc.IsLoopbackHost(host) {
		fmt.Fprintf(stderr, "gatebridge: warning: mcp: %s is not a loopback address and this is plain HTTP: the token and everything else travel in clear text (put a TLS proxy in front, or listen on loopback)\n", ho.Addr)
	}
	return srv.ServeHTTP(ctx, ho, stderr)
}
