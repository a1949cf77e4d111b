package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/internal/config"
	"github.com/gatebridge/gatebridge/internal/doctor"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/bwrap"
)

// checkResult is one line of `gatebridge doctor` (and one object of --json).
type checkResult = doctor.Finding

func newDoctorCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor [--json]",
		Short: "Check which sandboxes can run here and how well calls will be noticed",
		Long: `Check each sandbox backend (` + strings.Join(a.backends.Names(), ", ") + `), the inotify limits, the filesystem of the session directory, the wake-up
mechanism, and which backend --sandbox auto would choose and why.

Each line is ok, warn (works with a caveat) or problem, followed by a hint
where there is something to do. The exit code is 1 when the configured
backend (sandbox.backend) cannot run here, else 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			checks, ok := doctor.Run(ctx, doctorOptions(a.cfg, a.backends, a.kinds))
			if err := printChecks(cmd.OutOrStdout(), checks, asJSON); err != nil {
				return err
			}
			if !ok {
				return &exitError{1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON list of {check, status, detail, hint}")
	cmd.Flags().String("sandbox", "", "backend to judge the exit code by: "+config.BackendChoices(a.backends)+" (default: config sandbox.backend)")
	cmd.Flags().String("image", "", "docker image to look for (default: config sandbox.docker.image)")
	cmd.Flags().String("runtime", "", "OCI runtime to judge the docker backend by (default: config sandbox.docker.runtime)")
	return needsConfig(cmd)
}

func printChecks(w io.Writer, checks []checkResult, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(checks)
	}
	for _, c := range checks {
		if _, err := fmt.Fprintf(w, "%-8s %s: %s\n", c.Status, c.Check, c.Detail); err != nil {
			return err
		}
		if c.Hint != "" {
			fmt.Fprintf(w, "%-8s %s\n", "", "hint: "+strings.ReplaceAll(c.Hint, "\n", "\n"+strings.Repeat(" ", 15)))
		}
	}
	return nil
}

// doctorOptions is what doctor's checks need of cfg: the backends'
// settings, auto's choice, the gates built for the current workspace, the
// gates' isolator.
func doctorOptions(cfg *Config, backends *sandbox.Registry, kinds *gates.KindRegistry) doctor.Options {
	var sourceKinds []string
	for _, src := range gateSources(cfg) {
		sourceKinds = append(sourceKinds, src.Kind)
	}
	ws, wsErr := config.ResolveWorkspace(cfg.Sandbox.Workspace)
	s := backendSettings(cfg)
	return doctor.Options{
		Config: &cfg.Config, ConfigFile: cfg.configFile, ConfigGiven: cfg.configGiven,
		Backends: backends, Settings: s, Kinds: kinds, SourceKinds: sourceKinds,
		Auto: func(ctx context.Context) (sandbox.Backend, sandbox.BackendEntry, string, error) {
			return chooseAuto(ctx, cfg, backends, s)
		},
		Gates: func(ctx context.Context, warn func(string)) (*gates.Registry, map[string]string, error) {
			if wsErr != nil {
				return nil, nil, wsErr
			}
			return buildRegistry(ctx, kinds, cfg, ws, ws, warn)
		},
		Secrets: cfg.secrets, Untrusted: cfg.UntrustedDirs(ws),
		Isolator:       func() gates.Isolator { return gateIsolator(cfg) },
		DefaultGateUID: bwrap.GateUID,
	}
}
