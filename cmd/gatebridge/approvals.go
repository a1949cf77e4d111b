package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/gatebridge/gatebridge/bridge/approval"
	"github.com/gatebridge/gatebridge/internal/tty"
)

// termStdin is what the sandbox reads: when stdin is the terminal the
// person answers on, what the Terminal routes to it (never an answer).
func termStdin(term *approval.Terminal, stdin io.Reader) io.Reader {
	if f, ok := stdin.(*os.File); ok && term != nil && tty.IsTerminal(f) {
		return term.Stdin()
	}
	return stdin
}

func newGrantsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "grants",
		Short: "List, add and remove the grants that let gate calls run without asking",
		Long: `A grant lets calls of a gate that needs approval (approval: ask) run
without asking: with exactly these arguments, or with arguments each
matching a pattern (RE2, in full), in one workspace or in every one,
optionally for a while. A grant never allows what the gate's own argument
policy refuses. Grants live in approvals.grants_file
($XDG_CONFIG_HOME/gatebridge/grants.yaml), never in a workspace.`,
	}
	ls := &cobra.Command{Use: "ls", Short: "List the grants, each with what it allows in words", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, err := a.cfg.GrantsStore()
			if err != nil {
				return err
			}
			list, err := store.List(time.Now())
			for _, g := range list {
				fmt.Fprintf(cmd.OutOrStdout(), "%s  %s\n", g.ID, g.Describe())
			}
			if err == nil && len(list) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "gatebridge: no grants in %s\n", store.Path())
			}
			return err
		}}
	var f approval.GrantFlags
	add := &cobra.Command{
		Use:   "add GATE (--exact [--] ARG... | --arg N=RE... | --any) [--workspace DIR] [--for 1h]",
		Short: "Let calls of GATE run without asking",
		Example: `  gatebridge grants add git_log --exact -- -n 5
  gatebridge grants add git_log --arg 1=-n --arg 2='[0-9]+' --workspace ~/src/app
  gatebridge grants add http_github --arg 1='https://api\.github\.com/repos/acme/.*' --for 1h`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.Gate, f.Exact = args[0], args[1:]
			g, err := f.Grant(time.Now())
			if err != nil {
				return &usageError{err}
			}
			store, err := a.cfg.GrantsStore()
			if err != nil {
				return err
			}
			if g, err = store.Add(g, time.Now()); err == nil {
				fmt.Fprintf(cmd.OutOrStdout(), "%s  %s\n", g.ID, g.Describe())
			}
			return err
		}}
	add.Flags().BoolVar(&f.IsExact, "exact", false, "allow exactly the arguments after GATE (put -- before them)")
	add.Flags().StringArrayVar(&f.Args, "arg", nil, "N=RE: argument N (from 1) must match RE in full; give every argument")
	add.Flags().BoolVar(&f.Any, "any", false, "allow any arguments the gate's policy allows")
	add.Flags().StringVar(&f.Workspace, "workspace", "", "only for sandboxes of this workspace (default: every workspace)")
	add.Flags().DurationVar(&f.For, "for", 0, "the grant expires after this long (e.g. 1h)")
	rm := &cobra.Command{Use: "rm ID...", Short: "Remove grants (running gatebridge processes stop using them at once)", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, err := a.cfg.GrantsStore()
			for _, id := range args {
				if err == nil {
					if err = store.Remove(id); err == nil {
						fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", id)
					}
				}
			}
			return err
		}}
	cmd.AddCommand(needsConfig(ls), needsConfig(add), needsConfig(rm))
	return cmd
}
