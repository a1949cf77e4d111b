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

			parents := []string{bridge.DefaultParent()}
			if cfg.Bridge.SessionDir != "" {
				parents = append(parents, cfg.Bridge.SessionDir)
			}
			if cfg.Sandbox.Docker.SessionsRoot != "" {
				parents = append(parents, cfg.Sandbox.Docker.SessionsRoot)
			}
			// The default sessions roots, with their age before their
			// sessions are pruned (which touches them).
			roots := bridge.SandboxRoots(bridge.DefaultParent())
			for _, r := range roots {
				parents = append(parents, r.Path)
			}
			n := 0
			for _, p := range parents {
				removed, err := bridge.PruneSessions(p)
				for _, r := range removed {
					fmt.Fprintln(out, r)
				}
				n += len(removed)
				for _, e := range unjoin(err) {
					if pe, ok := e.(*bridge.PruneError); ok {
						fail(pe.Path, pe.Err)
					} else {
						fail(p, e)
					}
				}
			}
			fmt.Fprintf(errw, "gatebridge: removed %d session(s)\n", n)

			if len(roots) > 0 {
				var inUse []string
				var err error
				if d == nil {
					err = cmp.Or(engineErr, errors.New("no docker engine here"))
				} else {
					inUse, err = d.SessionsRoots(ctx)
				}
				if err != nil {
					// Without the engine's list, a root may belong to a
					// sandbox: leave them all.
					fmt.Fprintf(errw, "gatebridge: %d sandbox sessions root(s) not checked: %v\n", len(roots), err)
				} else {
					removed, errs := bridge.PruneSandboxRoots(roots, inUse, bridge.SandboxRootGrace)
					for _, r := range removed {
						fmt.Fprintln(out, r)
					}
					for _, e := range errs {
						fail(e.Path, e.Err)
					}
					if len(removed) > 0 {
						fmt.Fprintf(errw, "gatebridge: removed %d unused sandbox sessions root(s)\n", len(removed))
					}
				}
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

// unjoin lists the errors err joins (err itself if it joins none).
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
