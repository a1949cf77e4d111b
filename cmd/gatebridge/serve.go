package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/internal/trust"
)

func newServeCmd(a *app) *cobra.Command {
	var sf serveFlags
	cmd := &cobra.Command{
		Use:   "serve --stdio | --listen ADDR --token-file FILE",
		Short: "Serve the JSON-RPC protocol: a runtime in any language runs sandboxed processes and answers gates",
		Long: `Serve the gatebridge JSON-RPC protocol (docs/jsonrpc.md), one JSON object
per line; logs go to stderr. A runtime opens sandboxes, starts processes
in them with streamed output, stdin and signals, and registers gates that
it answers itself.

--stdio serves one connection on stdin and stdout. Everything it started
is stopped and removed when stdin closes.

--listen ADDR serves TCP (TLS with --tls-cert and --tls-key), for a
runtime on another machine or in another container of a Kubernetes pod:
each client connection is a connection of its own, with its own
sandboxes, removed when it closes. The client's first line must be
initialize with the token of --token-file in params.authToken; anything
else is refused. --token-file is required, on loopback too. Connections
without the token take no slot of --max-connections: a few wait at once,
and the oldest idle one is closed to make room for a new one.

--attach DIR serves a sandbox that gatebridge does not start: a container
of the same pod sharing DIR and the workspace at the same paths, running
gatebridge agent --dir DIR/agent. Commands go through DIR (no exec API, no
docker socket); sessions live in DIR/sessions. Its isolation is the pod's.

--pool N keeps N started sandboxes (docker) for each sandbox spec a
sandbox/open asked for (image, OCI runtime, workspace and its mode):
the next open of that spec takes one, and a replacement starts in the
background. A sandbox is never pooled again after a client had it.

SIGINT, SIGTERM and SIGHUP stop the server and every connection, and
every pooled sandbox.`,
		Example: `  gatebridge serve --stdio
  python3 examples/agent_loop.py   # drives it with clients/python
  gatebridge serve --listen 127.0.0.1:7800 --token-file ~/.config/gatebridge/token
  gatebridge serve --listen :7800 --token-file /run/token --tls-cert tls.crt --tls-key tls.key
  gatebridge serve --listen :7800 --token-file /run/token --attach /gatebridge   # a pod's sidecar (deploy/k8s)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.serve(cmd, sf) },
	}
	f := cmd.Flags()
	f.BoolVar(&sf.stdio, "stdio", false, "serve one connection on stdin and stdout")
	f.StringVar(&sf.listen, "listen", "", "serve TCP on ADDR (host:port; :PORT is every interface): one connection per client")
	f.StringVar(&sf.tokenFile, "token-file", "", "with --listen (required): clients send the token in this file in initialize's authToken (at least 32 bytes: openssl rand -hex 32)")
	f.StringVar(&sf.tlsCert, "tls-cert", "", "with --listen: serve TLS with this certificate (PEM; with --tls-key)")
	f.StringVar(&sf.tlsKey, "tls-key", "", "with --listen: the private key of --tls-cert (PEM)")
	f.IntVar(&sf.maxConns, "max-connections", rpc.DefaultMaxConns, "with --listen: authenticated connections open at once; one more token holder is refused (connections still in their handshake do not count)")
	f.StringVar(&sf.attach, "attach", "", "serve a pod's sandbox: commands go to 'gatebridge agent --dir DIR/agent' in a container sharing `DIR` (and the workspace) at the same paths; the only backend is then \"attached\"")
	f.BoolVar(&sf.attachReadOnly, "attach-readonly-workspace", false, "with --attach: the sandbox mounts the workspace read-only (then only read-only sandboxes open; without it only writable ones: gatebridge cannot enforce either)")
	f.String("image", "", "docker image (docker backend), when sandbox/open gives none")
	f.String("runtime", "", "OCI runtime of the docker engine (docker backend), when sandbox/open gives none")
	f.String("watch", "", "how the host notices calls: auto, events or poll")
	f.Int("pool", 0, "keep N started sandboxes per sandbox spec (docker), so that sandbox/open takes one at once (config sandbox.pool.size)")
	return needsConfig(cmd)
}

// serveFlags choose serve's transport.
type serveFlags struct {
	stdio           bool
	listen          string
	tokenFile       string
	tlsCert, tlsKey string
	maxConns        int
	attach          string
	attachReadOnly  bool
}

// validate checks the flags together, before anything is opened.
func (f serveFlags) validate() error {
	usage := func(msg, hint string) error { return &usageError{withHint(errors.New("serve: "+msg), hint)} }
	switch {
	case !f.stdio && f.listen == "":
		return usage("choose a transport", "pass --stdio, or --listen ADDR --token-file FILE")
	case f.stdio && f.listen != "":
		return usage("--stdio and --listen exclude each other", "pass one of them")
	case f.stdio && (f.tokenFile != "" || f.tlsCert != "" || f.tlsKey != ""):
		return usage("--token-file, --tls-cert and --tls-key go with --listen", "stdio needs no token: the client started this process")
	case f.attachReadOnly && f.attach == "":
		return usage("--attach-readonly-workspace goes with --attach", "pass --attach DIR too")
	case f.stdio:
		return nil
	}
	if _, _, err := net.SplitHostPort(f.listen); err != nil {
		return usage(fmt.Sprintf("--listen %q: %v", f.listen, err), "give host:port, e.g. 127.0.0.1:7800, or :7800 for every interface")
	}
	switch {
	case f.tokenFile == "":
		return usage("--listen needs --token-file: anyone who reaches "+f.listen+" could run commands",
			"put a random token in a file only you can read (openssl rand -hex 32 > token; chmod 600 token); clients send it in initialize's authToken")
	case (f.tlsCert == "") != (f.tlsKey == ""):
		return usage("--tls-cert and --tls-key go together", "pass both (PEM files) to serve TLS, or neither to serve plain TCP")
	case f.maxConns < 1:
		return usage(fmt.Sprintf("--max-connections %d: want at least 1", f.maxConns), "the default is "+strconv.Itoa(rpc.DefaultMaxConns))
	}
	return nil
}

// serve serves the protocol on the transport the flags choose. Every
// transport hands each connection to the same function, (*rpc.Server).Serve:
// one connection on a reader and a writer, until the reader ends or ctx
// is cancelled, then everything the connection started is removed.
func (a *app) serve(cmd *cobra.Command, f serveFlags) error {
	if err := f.validate(); err != nil {
		return err
	}
	stderr := cmd.ErrOrStderr()
	var listen func(ctx context.Context, conn rpc.ServeFunc) error
	if f.listen != "" {
		var err error
		if listen, err = f.listener(stderr); err != nil {
			return err
		}
	}
	opts, closeAudit, err := a.rpcOptions(stderr)
	if err != nil {
		return err
	}
	defer closeAudit()
	if f.listen != "" {
		// A sandbox that could read the token (or the TLS key) could
		// connect as a client: no workspace, gate root or shared
		// directory may hold them.
		places := trust.ReachableOf(&a.cfg.Config)
		if f.attach != "" {
			places = append(places, trust.Reachable{What: "--attach", Path: f.attach})
		}
		err := trust.Guard(&opts, places, []trust.SecretFile{{Flag: "--token-file", Path: f.tokenFile}, {Flag: "--tls-key", Path: f.tlsKey}})
		if err != nil {
			return err
		}
	}
	if f.attach != "" {
		detach, err := attach(&opts, f.attach, f.attachReadOnly, a.cfg.Sandbox.Attach)
		if err != nil {
			return err
		}
		defer detach()
	} else if f.listen != "" && !opts.AllowUnsandboxed {
		// Over the network a leaked token would be a shell on this host:
		// no unsandboxed backend unless the config allows it.
		opts.Backends = opts.Backends.Isolating()
	}
	// Caught, these signals end every connection (and everything it
	// started); and the commands it starts get them with their default
	// action even when gatebridge was started ignoring them (nohup, a
	// background job): a caught signal is reset at exec, an ignored one
	// is not.
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	pc := a.cfg.Sandbox.Pool
	opts.Pool = control.PoolOptions{Size: pc.Size, MaxTotal: pc.MaxTotal, Idle: pc.Idle}
	srv := rpc.NewServer(opts)
	defer srv.Close() // every pooled container stopped, on a signal too
	conn := srv.Serve
	if listen != nil {
		return listen(ctx, conn)
	}
	return conn(ctx, rpc.EndOnDone(ctx, cmd.InOrStdin()), cmd.OutOrStdout())
}

// listener reads the token and the TLS key pair (so that a bad file fails
// before anything starts) and returns the function that listens on
// f.listen and serves each connection with conn.
func (f serveFlags) listener(stderr io.Writer) (func(ctx context.Context, conn rpc.ServeFunc) error, error) {
	token, err := trust.LoadToken("serve", f.tokenFile)
	if err != nil {
		return nil, err
	}
	var tlsConfig *tls.Config
	if f.tlsCert != "" {
		cert, err := trust.LoadKeyPair("serve", f.tlsCert, f.tlsKey)
		if err != nil {
			return nil, err
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }
	return func(ctx context.Context, conn rpc.ServeFunc) error {
		return rpc.ListenAndServe(ctx, "serve", f.listen, tlsConfig, rpc.ListenOptions{Token: token, MaxConns: f.maxConns, Logf: logf}, conn)
	}, nil
}

// rpcOptions are the protocol server's options from the config (serve,
// mcp); the returned function closes the audit log.
func (a *app) rpcOptions(stderr io.Writer) (rpc.Options, func(), error) {
	cfg := a.cfg
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }
	var audit io.Writer
	closeAudit := func() {}
	if cfg.Audit.Path != "" {
		f, err := cfg.OpenAudit()
		if err != nil {
			return rpc.Options{}, nil, err
		}
		audit, closeAudit = f, func() { f.Close() }
	}
	store, err := cfg.GrantsStore()
	if err != nil {
		closeAudit()
		return rpc.Options{}, nil, err
	}
	bcfg := cfg.SessionConfig()
	bcfg.Audit, bcfg.Redact, bcfg.Logf = audit, cfg.secrets.Redactor(), logf
	return rpc.Options{Options: control.Options{
		Backends:         a.backends,
		Settings:         backendSettings(cfg),
		AllowUnsandboxed: cfg.Sandbox.AllowUnsandboxed,
		HowLocal:         rpc.HowLocal,
		Gates: func(workspace, inside string, writable bool) (*gates.Registry, map[string]string, error) {
			if err := cfg.CheckServeWorkspace(workspace, writable, cfg.configFile); err != nil {
				return nil, nil, err
			}
			return buildRegistry(context.Background(), a.kinds, cfg, workspace, inside, func(w string) { logf("gatebridge: warning: %s", w) })
		},
		Approvals:       cfg.ApprovalConfig(store, cfg.policy, audit, cfg.secrets.Redactor().String),
		Bridge:          bcfg,
		Process:         cfg.SpecTemplate(),
		RunAs:           func(workspace string) (int, int) { return cfg.RunAs(workspace) },
		FSMaxFileBytes:  cfg.Gates.MaxFileBytes,
		MaxCommandBytes: cfg.Sandbox.MaxCommandBytes, MaxCommands: cfg.Sandbox.MaxCommands,
		Logf: logf,
	}, Version: versionString()}, closeAudit, nil
}
