package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gatebridge/gatebridge/bridge/approval"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/internal/tty"
)

// grantsStore is the grants file: approvals.grants_file, or
// $XDG_CONFIG_HOME/gatebridge/grants.yaml.
func grantsStore(cfg *Config) (*approval.Store, error) {
	path := cfg.Approvals.GrantsFile
	if path == "" {
		p, err := approval.DefaultPath()
		if err != nil {
			return nil, err
		}
		path = p
	}
	s, err := approval.NewStore(path)
	if err != nil {
		return nil, &configError{Key: "approvals.grants_file", Msg: err.Error(), Help: "an absolute path outside every workspace"}
	}
	return s, nil
}

// approvalSettings are the gates' settings the config holds by gate
// name (command gates, http gates); MCP tools carry their own.
func approvalSettings(cfg *Config) map[string]approval.Setting {
	m := map[string]approval.Setting{}
	for _, c := range cfg.Gates.Commands {
		m[c.Name], _ = approval.ParseSetting(c.Approval)
	}
	for _, h := range cfg.Gates.HTTP {
		m[h.Name], _ = approval.ParseSetting(h.Approval)
	}
	return m
}

// newRunApprovals is the decider of a run (and sandbox exec): it asks
// the person on the controlling terminal when a gate needs it (term, nil
// without a terminal: such calls are denied), and records every decision
// in the audit log.
func newRunApprovals(cfg *Config, reg *gates.Registry, workspace string, local bool, audit io.Writer) (*approval.Decider, *approval.Terminal, error) {
	store, err := grantsStore(cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := store.Inside(workspace); err != nil {
		return nil, nil, err
	}
	dc := approval.Config{Timeout: cfg.Approvals.Timeout, MaxPending: cfg.Approvals.MaxPending, Store: store,
		Settings: approvalSettings(cfg), Record: auditJSON[approval.Record](audit), Redact: cfg.secrets.Redactor().String}
	d := approval.New(dc)
	if !d.Asks(reg) {
		return d, nil, nil
	}
	term, err := approval.OpenTerminal()
	if err != nil {
		dc.NoOne = "no terminal to ask on"
		return approval.New(dc), nil, nil
	}
	if local {
		term.Note = "the local backend runs the command as you: it could edit the grants file itself, so approvals here guide, not guard"
	}
	dc.Approver = term
	return approval.New(dc), term, nil
}

// auditJSON writes records as JSON lines to w (nil: nowhere).
func auditJSON[T any](w io.Writer) func(T) {
	return func(r T) {
		if w == nil {
			return
		}
		if line, err := json.Marshal(r); err == nil {
			w.Write(append(line, '\n'))
		}
	}
}

// termStdin is what the sandbox reads when stdin is the terminal the
// person answers on: one reader routes lines (the answer never reaches
// the sandbox).
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
without asking: calls with exactly these arguments, or with arguments each
matching a pattern (RE2, anchored), in one workspace or in every one,
optionally for a while only. A grant never allows what the gate's own
argument policy refuses. Grants are kept in approvals.grants_file
($XDG_CONFIG_HOME/gatebridge/grants.yaml), never in a workspace.`,
	}
	cmd.AddCommand(newGrantsLsCmd(a), newGrantsAddCmd(a), newGrantsRmCmd(a))
	return cmd
}

func newGrantsLsCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use: "ls", Short: "List the grants, each with what it allows in words", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, err := grantsStore(a.cfg)
			if err != nil {
				return err
			}
			list, err := store.List(time.Now())
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"file": store.Path(), "grants": list})
			}
			for _, g := range list {
				fmt.Fprintf(cmd.OutOrStdout(), "%s  %s\n", g.ID, g.Describe())
			}
			if len(list) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "gatebridge: no grants in %s\n", store.Path())
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the grants as JSON")
	return needsConfig(cmd)
}

func newGrantsAddCmd(a *app) *cobra.Command {
	var patterns []string
	var exact, anyArgs bool
	var workspace string
	var lasting time.Duration
	cmd := &cobra.Command{
		Use:   "add GATE (--exact [-- ARG...] | --arg N=RE... | --any) [--workspace DIR] [--for 1h]",
		Short: "Let calls of GATE run without asking",
		Example: `  gatebridge grants add git_log --exact -- -n 5
  gatebridge grants add git_log --arg 1=-n --arg 2='[0-9]+' --workspace ~/src/app
  gatebridge grants add http_github --arg 1=GET --arg 2='https://api\.github\.com/repos/acme/.*' --for 1h`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g := approval.Grant{Gate: args[0], Lifetime: approval.LifeAlways, AnyArgs: anyArgs}
			if exact {
				g.Exact = append([]string{}, args[1:]...)
			} else if len(args) > 1 {
				return &usageError{withHint(errors.New("grants add: arguments after GATE need --exact"), "gatebridge grants add GATE --exact -- ARG...")}
			}
			if len(patterns) > 0 {
				p, err := argPatterns(patterns)
				if err != nil {
					return err
				}
				g.Patterns = p
			}
			if workspace != "" {
				abs, err := filepath.Abs(workspace)
				if err != nil {
					return err
				}
				g.Lifetime, g.Workspace = approval.LifeWorkspace, abs
			}
			if lasting > 0 {
				g.Expires = time.Now().Add(lasting).UTC().Truncate(time.Second)
			}
			if err := g.Validate(); err != nil {
				return &usageError{withHint(err, "give one of --exact, --arg N=RE or --any")}
			}
			store, err := grantsStore(a.cfg)
			if err != nil {
				return err
			}
			added, err := store.Add(g, time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s  %s\n", added.ID, added.Describe())
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&exact, "exact", false, "allow exactly the arguments after GATE (put -- before them)")
	f.StringArrayVar(&patterns, "arg", nil, "N=RE: argument N (from 1) must match RE in full; give every argument")
	f.BoolVar(&anyArgs, "any", false, "allow any arguments the gate's policy allows")
	f.StringVar(&workspace, "workspace", "", "only for sandboxes of this workspace (default: every workspace)")
	f.DurationVar(&lasting, "for", 0, "the grant expires after this long (e.g. 1h)")
	return needsConfig(cmd)
}

// argPatterns turns --arg N=RE flags into one pattern per argument; every
// position from 1 to the highest must be given.
func argPatterns(flags []string) ([]string, error) {
	byPos := map[int]string{}
	most := 0
	for _, f := range flags {
		n, re, ok := strings.Cut(f, "=")
		i, err := strconv.Atoi(n)
		if !ok || err != nil || i < 1 || i > 4096 {
			return nil, &usageError{withHint(fmt.Errorf("grants add: --arg %q: want N=RE with N from 1", f), "e.g. --arg 1=-n --arg 2='[0-9]+'")}
		}
		if _, dup := byPos[i]; dup {
			return nil, &usageError{fmt.Errorf("grants add: argument %d given twice", i)}
		}
		byPos[i], most = re, max(most, i)
	}
	out := make([]string, most)
	for i := range out {
		re, ok := byPos[i+1]
		if !ok {
			return nil, &usageError{withHint(fmt.Errorf("grants add: no --arg %d (a grant names every argument)", i+1), fmt.Sprintf("--arg %d=.* allows anything the policy allows there", i+1))}
		}
		out[i] = re
	}
	return out, nil
}

func newGrantsRmCmd(a *app) *cobra.Command {
	return needsConfig(&cobra.Command{
		Use: "rm ID...", Short: "Remove grants (running gatebridge processes stop using them at once)", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, err := grantsStore(a.cfg)
			if err != nil {
				return err
			}
			for _, id := range args {
				if err := store.Remove(id); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", id)
			}
			return nil
		},
	})
}
