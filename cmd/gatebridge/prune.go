package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/docker"
)

func newPruneCmd(a *app) *cobra.Command {
	return needsConfig(&cobra.Command{
		Use:   "prune",
		Short: "Remove what gatebridge processes that died left behind",
		Long: `Remove session directories whose gatebridge process is gone (their lock
is free), in the default session parent, bridge.session_dir and the
persistent sandboxes' sessions roots, per-command docker containers whose
owner is gone, and bwrap limit cgroups whose gatebridge was killed. Prints each path or container removed. Every
gatebridge start does the same for its own session parent (and, with
docker, for containers).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := a.cfg
			out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
			parents := []string{mailbox.DefaultParent()}
			if cfg.Bridge.SessionDir != "" {
				parents = append(parents, cfg.Bridge.SessionDir)
			}
			if cfg.Sandbox.Docker.SessionsRoot != "" {
				parents = append(parents, cfg.Sandbox.Docker.SessionsRoot)
			}
			roots, _ := filepath.Glob(filepath.Join(mailbox.DefaultParent(), "sandbox-*"))
			parents = append(parents, roots...)
			n := 0
			for _, p := range parents {
				removed, err := mailbox.Prune(p)
				for _, r := range removed {
					fmt.Fprintln(out, r)
				}
				n += len(removed)
				if err != nil {
					fmt.Fprintf(errw, "gatebridge: prune %s: %v\n", p, err)
				}
			}
			fmt.Fprintf(errw, "gatebridge: removed %d session(s)\n", n)
			if cgs := sandbox.PruneCgroups(); len(cgs) > 0 {
				for _, c := range cgs {
					fmt.Fprintln(out, c)
				}
				fmt.Fprintf(errw, "gatebridge: removed %d limit cgroup(s)\n", len(cgs))
			}
			if os.Getenv("DOCKER_HOST") == "" {
				if _, err := os.Stat("/var/run/docker.sock"); err != nil {
					return nil // no engine here
				}
			}
			d, err := newDocker(cfg)
			if err != nil {
				return nil
			}
			defer d.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
			defer cancel()
			if d.Ping(ctx) != nil {
				fmt.Fprintln(errw, "gatebridge: the docker engine does not answer: containers not checked")
				return nil
			}
			removed, err := d.Prune(ctx, docker.PruneOptions{})
			printRemoved(cmd, removed)
			return err
		},
	})
}
