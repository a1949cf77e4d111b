package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/internal/config"
	"github.com/gatebridge/gatebridge/internal/hostilefs"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/docker"
)

// checkSandboxName refuses a name sandbox/docker would refuse, as a usage
// error, before the engine is contacted.
func checkSandboxName(name string) error {
	if !docker.ValidName(name) {
		return withHint(fmt.Errorf("sandbox: invalid name %q", name),
			"a name is 1-63 letters, digits, '_', '.' or '-', starting with a letter or digit")
	}
	return nil
}

// oneName validates the single NAME argument of start and stop.
func oneName(verb string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return withHint(fmt.Errorf("sandbox %s: want exactly one NAME, got %d arguments", verb, len(args)),
				"usage: "+cmd.UseLine())
		}
		return checkSandboxName(args[0])
	}
}

func newSandboxCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Manage persistent docker sandboxes (start, exec, cp, stop, ls, prune)",
		Long: `A persistent sandbox is one long-lived container whose entrypoint is
gatebridge agent: each command is handed to it through a directory (no
docker exec), in its own session under a sessions root mounted once.
Commands in the same sandbox share its filesystem (/tmp, the root fs when
writable); concurrent commands get separate sessions.

The exit code is 125 when gatebridge itself failed (no engine, unknown
sandbox, bad arguments).`,
		Example: `  gatebridge sandbox start work --workspace .
  gatebridge sandbox exec work -- sh -c 'gb_echo hi'
  gatebridge run --reuse work -- ls
  gatebridge sandbox ls
  gatebridge sandbox stop work`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withHint(errors.New("sandbox: missing subcommand"), "see 'gatebridge sandbox --help'")
		},
	}
	cmd.AddCommand(newSandboxStartCmd(a), newSandboxExecCmd(a), newSandboxStopCmd(a), newSandboxLsCmd(a), newSandboxPruneCmd(a),
		newSandboxCpCmd(a))
	return cmd
}

// engine returns a docker backend whose engine answers.
func engine(ctx context.Context, cfg *Config) (*docker.Backend, error) {
	d, err := newDocker(cfg)
	if err != nil {
		return nil, err
	}
	if err := d.Ping(ctx); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// withEngine is a RunE that hands run a docker backend whose engine
// answers, and closes it after.
func (a *app) withEngine(run func(cmd *cobra.Command, args []string, d *docker.Backend) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		d, err := engine(cmd.Context(), a.cfg)
		if err != nil {
			return err
		}
		defer d.Close()
		return run(cmd, args, d)
	}
}

// printRemoved lists the containers a prune removed (stdout) and counts
// them (stderr).
func printRemoved(cmd *cobra.Command, removed []string) {
	for _, name := range removed {
		fmt.Fprintln(cmd.OutOrStdout(), name)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "gatebridge: removed %d container(s)\n", len(removed))
}

func newSandboxStartCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "start [flags] NAME",
		Short: "Start the persistent docker sandbox NAME",
		Long: `Start a long-lived container gatebridge-NAME from the configured image,
hardened like per-command containers, with the sessions root mounted at
/gatebridge/sessions and the workspace (default: the current directory) at
/workspace, read-only unless --writable-workspace. Its entrypoint is
gatebridge agent (this binary, mounted read-only; the same agent in the
image's /bin/sh when this binary is not statically linked). Then run
commands in it with 'gatebridge sandbox exec NAME -- CMD' or
'gatebridge run --reuse NAME' from the workspace or a directory under it.`,
		Args: oneName("start"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := a.cfg
			workspace, err := config.ResolveWorkspace(cfg.Sandbox.Workspace)
			if err != nil {
				return err
			}
			if err := config.CheckWorkspacePath(workspace); err != nil {
				return err
			}
			d, err := newDocker(cfg)
			if err != nil {
				return err
			}
			defer d.Close()
			uid, gid := cfg.RunAs(workspace)
			sb, root, err := control.StartNamed(cmd.Context(), d, sandbox.StartSpec{
				Name: args[0], SessionsRoot: cfg.Sandbox.Docker.SessionsRoot, Workspace: workspace,
				WorkspaceWritable: cfg.Sandbox.WritableWorkspace, ProtectedPaths: cfg.Sandbox.ProtectedPaths,
				UID: uid, GID: gid, AllowRoot: cfg.Sandbox.AllowRoot,
			}, func(format string, args ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...) })
			var re *bridge.SessionsRootError
			if errors.As(err, &re) {
				return &configError{Key: "sandbox.docker.sessions_root", Msg: re.Err.Error(), Help: re.Help}
			} else if err != nil {
				return imageHintCLI(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n", sb.(*docker.Sandbox).ID())
			fmt.Fprintf(cmd.ErrOrStderr(), "gatebridge: started sandbox %s (image %s, sessions %s, workspace %s%s)\n",
				args[0], d.Config().Image, root, workspace, map[bool]string{true: ", writable", false: ", read-only"}[cfg.Sandbox.WritableWorkspace])
			return nil
		},
	}
	f := cmd.Flags()
	f.String("sessions-root", "", "host directory mounted for the sessions (default $XDG_RUNTIME_DIR/gatebridge/sessions, else gatebridge-sessions-<uid> in /dev/shm or the temp dir)")
	f.String("workspace", "", "directory mounted at /workspace (default: current directory)")
	f.Bool("writable-workspace", false, "let commands write the workspace")
	f.String("image", "", "docker image (default: config sandbox.docker.image)")
	f.String("runtime", "", "OCI runtime of the docker engine, e.g. runsc (default: config sandbox.docker.runtime)")
	return needsConfig(cmd)
}

func newSandboxExecCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "exec [flags] NAME -- COMMAND [ARG...]",
		Short: "Run a command with the gates in the persistent sandbox NAME",
		Long: `Run COMMAND in the persistent sandbox NAME with its own session and the
gates on its PATH, exactly as 'gatebridge run --reuse NAME -- COMMAND'.
Run from the sandbox's workspace or a directory under it, it starts there;
from anywhere else, in the sandbox's workspace.

The exit code is the command's; 124 when it timed out; 125 when gatebridge
itself failed; 126 when policy.commands refused the command.`,
		Example: `  gatebridge sandbox exec work -- sh -c 'read_file README.md | head -3'`,
		Args:    execArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := a.cfg
			if cfg.Sandbox.Backend != autoBackend && cfg.Sandbox.Backend != docker.Name {
				// sandbox.backend from a config file or env: a persistent
				// sandbox is docker whatever the default backend is.
				cfg.Sandbox.Backend = docker.Name
			}
			cfg.Sandbox.Docker.Reuse = args[0]
			return a.runCommand(cmd, args[1:], asJSON)
		},
	}
	f := cmd.Flags()
	f.Duration("timeout", 0, "stop the command after this long (exit 124; default: config sandbox.timeout, 10m); 0 means no limit")
	f.String("workspace", "", "directory the command starts in, under the sandbox's workspace (default: the current directory when under it, else the sandbox's workspace)")
	f.Int64("max-output", 0, "bytes of stdout and stderr captured each for --json")
	f.Bool("keep-session", false, "keep the session directory and print its path (debugging)")
	f.String("watch", "", "how the host notices calls: auto, events or poll")
	f.BoolVar(&asJSON, "json", false, "print one JSON object with the result instead of streaming output")
	return needsConfig(cmd)
}

// execArgs wants NAME, "--", then the command (flags go anywhere before
// the "--").
func execArgs(cmd *cobra.Command, args []string) error {
	usage := "usage: gatebridge sandbox exec [flags] NAME -- COMMAND [ARG...]"
	dash := cmd.ArgsLenAtDash()
	if len(args) == 0 || dash == 0 {
		return withHint(errors.New("sandbox exec: no sandbox name given"), usage)
	}
	if err := checkSandboxName(args[0]); err != nil {
		return err
	}
	switch {
	case dash < 0 && len(args) > 1:
		return withHint(errors.New("sandbox exec: missing -- before the command"), usage)
	case len(args) < 2:
		return withHint(errors.New("sandbox exec: no command given"), usage)
	case dash > 1:
		return withHint(fmt.Errorf("sandbox exec: unexpected %q before --", args[1]), usage)
	}
	return nil
}

func newSandboxStopCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stop NAME",
		Short: "Remove the persistent sandbox NAME (its container; sessions are already gone)",
		Args:  oneName("stop"),
		RunE: a.withEngine(func(cmd *cobra.Command, args []string, d *docker.Backend) error {
			err := d.Stop(cmd.Context(), args[0])
			switch {
			case errors.Is(err, docker.ErrNotFound):
				// Stopping a sandbox that is already gone is not an error:
				// scripts run stop to be sure.
				fmt.Fprintf(cmd.ErrOrStderr(), "gatebridge: sandbox %s is not running: nothing to stop\n", args[0])
			case err != nil:
				return err
			default:
				fmt.Fprintf(cmd.ErrOrStderr(), "gatebridge: stopped sandbox %s\n", args[0])
			}
			// Its default sessions root goes with it: what its commands
			// left there is hostile (RemoveTree follows no link, at any
			// depth).
			if root, rerr := bridge.SandboxSessionsRoot(args[0]); rerr == nil {
				if err := hostilefs.RemoveTree(root); err != nil {
					return withHint(fmt.Errorf("sandbox stop: could not remove %s: %w", root, err),
						"`gatebridge prune` tries again and says what stays")
				}
			}
			return nil
		}),
	}
	return needsConfig(cmd)
}

// sandboxInfo is one line of `sandbox ls --json`.
type sandboxInfo struct {
	Name         string    `json:"name"`
	ID           string    `json:"id"`
	Image        string    `json:"image"`
	State        string    `json:"state"`
	Status       string    `json:"status"`
	SessionsRoot string    `json:"sessions_root"`
	Workspace    string    `json:"workspace"`
	Created      time.Time `json:"created"`
}

func newSandboxLsCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the persistent sandboxes",
		Args:    cobra.NoArgs,
		RunE: a.withEngine(func(cmd *cobra.Command, _ []string, d *docker.Backend) error {
			list, err := d.List(cmd.Context())
			if err != nil {
				return err
			}
			out := make([]sandboxInfo, 0, len(list))
			for _, i := range list {
				out = append(out, sandboxInfo{Name: i.Name, ID: i.ID, Image: i.Image, State: i.State, Status: i.Status,
					SessionsRoot: i.SessionsRoot, Workspace: i.Workspace, Created: i.Created})
			}
			return printSandboxes(cmd.OutOrStdout(), out, asJSON)
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON list")
	return needsConfig(cmd)
}

func printSandboxes(w io.Writer, list []sandboxInfo, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tIMAGE\tSTATUS\tWORKSPACE\tSESSIONS ROOT")
	for _, s := range list {
		id := s.ID
		if len(id) > 12 {
			id = id[:12]
		}
		ws := s.Workspace
		if ws == "" {
			ws = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, id, s.Image, s.Status, ws, s.SessionsRoot)
	}
	return tw.Flush()
}

func newSandboxPruneCmd(a *app) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "prune [--all]",
		Short: "Remove containers left behind by gatebridge processes that are gone",
		Long: `Remove per-command containers whose gatebridge process is gone (found by
the io.gatebridge.* labels); with --all also persistent sandboxes that are
not running (except one created in the last minute, which may be starting).
Running persistent sandboxes are kept: stop them by name.`,
		Args: cobra.NoArgs,
		RunE: a.withEngine(func(cmd *cobra.Command, _ []string, d *docker.Backend) error {
			removed, err := d.Prune(cmd.Context(), docker.PruneOptions{Persistent: all})
			printRemoved(cmd, removed)
			return err
		}),
	}
	cmd.Flags().BoolVar(&all, "all", false, "also remove persistent sandboxes that are not running")
	return needsConfig(cmd)
}

// imageHintCLI adds how to build the test image to an image error whose
// hint does not say it yet.
func imageHintCLI(err error) error {
	var se *sandbox.Error
	if !errors.As(err, &se) || !strings.Contains(se.Op, "image") || strings.Contains(se.Help, "make test-image") {
		return err
	}
	return withHint(err, se.Help+"; `make test-image` builds "+docker.TestImage+" without a registry (then --image "+docker.TestImage+")")
}
