package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gatebridge/gatebridge/configs"
	"github.com/gatebridge/gatebridge/internal/config"
	"github.com/gatebridge/gatebridge/internal/configview"
)

// newConfigCmd is `gatebridge config`: the annotated file, the effective
// configuration and where each value came from, and a file's check.
func newConfigCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Print the annotated config file or the effective config, or check a config file", Args: cobra.NoArgs}
	example := &cobra.Command{
		Use:   "example",
		Short: "Print the annotated config file: every key with its default and what it does",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := io.WriteString(cmd.OutOrStdout(), configs.Example)
			return err
		},
	}
	show := needsConfig(&cobra.Command{
		Use:   "show [run flags]",
		Short: "Print the effective config, each value with where it came from (secrets redacted)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return configview.Write(cmd.OutOrStdout(), configview.Flatten(&a.cfg.Config, config.SourceOf(a.cfg.configFile, a.cfg.configGiven, cmd.Flags(), configBackends(a.backends))))
		},
	})
	newRunCmd(a).Flags().VisitAll(func(f *pflag.Flag) { // run's flags that set a key
		if _, ok := config.FlagKeys[f.Name]; ok {
			show.Flags().AddFlag(f)
		}
	})
	validate := &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a config file as a run loads it (keys, values, who may write it, its command gates; MCP servers are not started)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, _, err := loadConfig(args[0], nil, a.backends)
			if err != nil {
				return err
			}
			ws, err := config.ResolveWorkspace(cfg.Sandbox.Workspace)
			if err != nil {
				return err
			}
			noMCP := *cfg
			noMCP.MCP.Servers = nil
			reg, _, err := buildRegistry(cmd.Context(), a.kinds, &noMCP, ws, ws, func(string) {})
			if err != nil {
				return err
			}
			reg.Close()
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(example, show, validate)
	return cmd
}
