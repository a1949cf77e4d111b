package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gatebridge/gatebridge/bridge/cmdpolicy"
	"github.com/gatebridge/gatebridge/bridge/control"
)

// ExitPolicy is the exit code of a command the command policy refused
// before it started (as a shell's "cannot execute").
const ExitPolicy = 126

// checkCommandPolicy decides argv before anything starts (run, sandbox
// exec): a deny is the refusal (exit 126; a command over
// sandbox.max_command_bytes: 125); an ask is returned, for run to ask
// once the terminal is open (no terminal: refused at once, with a hint).
func checkCommandPolicy(cfg *Config, argv []string) (cmdpolicy.Result, error) {
	if err := control.CheckCommandSize(argv, cmp.Or(cfg.Sandbox.MaxCommandBytes, control.DefaultMaxCommandBytes)); err != nil {
		return cmdpolicy.Result{}, &usageError{err}
	}
	r := cfg.policy.CheckArgv(argv)
	if r.Decision == cmdpolicy.Deny {
		return r, r.Err()
	}
	return r, nil
}

func newPolicyCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Show what the command policy (policy.commands) decides",
	}
	var script string
	var asJSON bool
	check := &cobra.Command{
		Use:   "check [--script SCRIPT | -- COMMAND [ARG...]]",
		Short: "Say whether a command or a script would be allowed, denied or asked about, and by which rule",
		Long: `Say what policy.commands decides about COMMAND (as run would start it) or
about a shell script, and which rule, the default, or the unknown setting
decided it. Nothing is run.

Exit code: 0 allow, 1 deny, 2 ask, 125 a bad config or usage.`,
		Example: `  gatebridge policy check -- rm -rf build
  gatebridge policy check --script 'ls | xargs rm'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if (script == "") == (len(args) == 0) {
				return &usageError{withHint(errors.New("policy check: give either --script SCRIPT or -- COMMAND [ARG...]"),
					"usage: gatebridge policy check -- COMMAND [ARG...]  or  gatebridge policy check --script 'SCRIPT'")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			p := a.cfg.policy
			var r cmdpolicy.Result
			if script != "" {
				r = p.CheckScript(script)
			} else {
				r = p.CheckArgv(args)
			}
			w := cmd.OutOrStdout()
			if asJSON {
				if err := json.NewEncoder(w).Encode(r); err != nil {
					return err
				}
			} else if p == nil {
				fmt.Fprintln(w, "allow: the config has no policy.commands, so every command is allowed")
			} else {
				fmt.Fprintln(w, r.String())
			}
			switch r.Decision {
			case cmdpolicy.Deny:
				return &exitError{1}
			case cmdpolicy.Ask:
				return &exitError{2}
			}
			return nil
		},
	}
	check.Flags().StringVar(&script, "script", "", "check this shell script instead of a command")
	check.Flags().BoolVar(&asJSON, "json", false, "print the decision as JSON")
	check.Flags().SetInterspersed(false)
	cmd.AddCommand(needsConfig(check))
	return cmd
}
