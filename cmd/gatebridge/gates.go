package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gatebridge/gatebridge/gates"
)

// gateDoc is one gate as `gates --format json` prints it: ready to hand to
// a model as a tool description.
type gateDoc struct {
	Name    string        `json:"name"`
	Summary string        `json:"summary"`
	Usage   string        `json:"usage"`
	Params  []gates.Param `json:"params"`
	Stdin   string        `json:"stdin"`
}

func newGatesCmd(a *app) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "gates",
		Short: "List the gates a sandboxed command can call, with usage",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := a.cfg
			ws, err := resolveWorkspace(cfg.Sandbox.Workspace)
			if err != nil {
				return err
			}
			reg, err := buildRegistry(cfg, ws, ws)
			if err != nil {
				return err
			}
			specs := reg.Specs()
			out := cmd.OutOrStdout()
			switch format {
			case "json":
				docs := make([]gateDoc, len(specs))
				for i, s := range specs {
					p := s.Params
					if p == nil {
						p = []gates.Param{}
					}
					docs[i] = gateDoc{s.Name, s.Summary, s.Usage, p, s.Stdin.String()}
				}
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(docs)
			case "text":
				tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				for _, s := range specs {
					usage := s.Usage
					if usage == "" {
						usage = s.Name
					}
					fmt.Fprintf(tw, "%s\t%s\n", usage, strings.ReplaceAll(s.Summary, "\n", " "))
				}
				return tw.Flush()
			default:
				return withHint(fmt.Errorf("gates: unknown format %q", format), "use --format text or --format json")
			}
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	cmd.Flags().String("workspace", "", "workspace the gates see (default: current directory)")
	return needsConfig(cmd)
}
