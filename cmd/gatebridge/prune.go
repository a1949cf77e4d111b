package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/sandbox/bwrap"
	"github.com/gatebridge/gatebridge/sandbox/docker"
)

func newPruneCmd(a *app) *cobra.Command {
	return needsConfig(&cobra.Command{
		Use:   "prune",
		Short: "Remove what gatebridge processes that died left behind",
		Long: `Remove session directories whose gatebridge process is gone (their lock
is free), in the default session parent, bridge.session_dir and the
persistent sandboxes' sessions roots; the default sessions roots
(sandbox-NAME) that no sandbox uses (a start that failed or was killed,
a container removed without 'gatebridge sandbox stop'); per-command
docker containers whose owner is gone; the staging directories (and their
mounts) of protected paths that a docker run killed before its container
started left in /run or the temp dir; and bwrap limit cgroups whose
gatebridge was killed. Prints each path or container removed, and each
path it could not remove with the reason on stderr: then the exit code is
125. Every gatebridge start does the same for its own session parent
(and, with docker, for containers).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := a.cfg
			out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
			failed := 0
			fail := func(path string, err error) {
				fmt.Fprintf(errw, "gatebridge: could not remove %s: %v\n", path, err)
				failed++
			}
			// One answer from the engine for the containers and the
			// sandboxes' roots alike.
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
			defer cancel()
			d, engineErr := pruneEngine(ctx, cfg)
			if d != nil {
				defer d.Close()
			}

			var extra []string
			for _, p := range []string{cfg.Bridge.SessionDir, cfg.Sandbox.Docker.SessionsRoot} {
				if p != "" {
					extra = append(extra, p)
				}
			}
			rep := bridge.PruneLeftovers(extra, func() ([]string, error) {
				if d == nil {
					return nil, cmp.Or(engineErr, errors.New("no docker engine here"))
				}
				return d.SessionsRoots(ctx)
			})
			for _, r := range rep.Sessions {
				fmt.Fprintln(out, r)
			}
			for _, e := range rep.SessionsFailed {
				fail(e.Path, e.Err)
			}
			fmt.Fprintf(errw, "gatebridge: removed %d session(s)\n", len(rep.Sessions))
			if rep.RootsErr != nil {
				// Without the engine's list, a root may belong to a
				// sandbox: all are left.
				fmt.Fprintf(errw, "gatebridge: %d sandbox sessions root(s) not checked: %v\n", rep.Roots, rep.RootsErr)
			}
			for _, r := range rep.RootsRemoved {
				fmt.Fprintln(out, r)
			}
			for _, e := range rep.RootsFailed {
				fail(e.Path, e.Err)
			}
			if len(rep.RootsRemoved) > 0 {
				fmt.Fprintf(errw, "gatebridge: removed %d unused sandbox sessions root(s)\n", len(rep.RootsRemoved))
			}

			// Staging mounts of protected paths (docker, as root) of a
			// gatebridge killed before its container started: no engine
			// needed.
			staged, serrs := docker.PruneStaging()
			for _, s := range staged {
				fmt.Fprintln(out, s)
			}
			for _, e := range serrs {
				fail(e.Path, e.Err)
			}
			if len(staged) > 0 {
				fmt.Fprintf(errw, "gatebridge: removed %d staging directory(ies) of protected paths\n", len(staged))
			}
			if cgs := bwrap.PruneCgroups(); len(cgs) > 0 {
				for _, c := range cgs {
					fmt.Fprintln(out, c)
				}
				fmt.Fprintf(errw, "gatebridge: removed %d limit cgroup(s)\n", len(cgs))
			}
			var cerr error
			switch {
			case d != nil:
				var removed []string
				removed, cerr = d.Prune(ctx, docker.PruneOptions{})
				printRemoved(cmd, removed)
			case engineErr != nil:
				fmt.Fprintln(errw, "gatebridge: the docker engine does not answer: containers not checked")
			}
			if failed > 0 {
				return errors.Join(cerr, fmt.Errorf("prune: %d path(s) could not be removed (listed above)", failed))
			}
			return cerr
		},
	})
}

// pruneEngine is the docker engine to prune containers in: nil and no
// error when there is none here, nil and the error when it does not
// answer.
func pruneEngine(ctx context.Context, cfg *Config) (*docker.Backend, error) {
	if os.Getenv("DOCKER_HOST") == "" {
		if _, err := os.Stat("/var/run/docker.sock"); err != nil {
			return nil, nil // no engine here
		}
	}
	return engine(ctx, cfg)
}
