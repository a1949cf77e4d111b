// Command gatebridge runs a shell command in a sandbox and lets it call
// host-side tools ("gates") through a filesystem mailbox.
//
//	gatebridge run -- bash -c 'read_file README.md | head -3'
//	gatebridge gates --format json
//
// See the README for the configuration and exit codes.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gatebridge/gatebridge/bridge/cmdpolicy"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/gates/httpgate"
	"github.com/gatebridge/gatebridge/gates/mcptools"
	"github.com/gatebridge/gatebridge/internal/buildinfo"
	"github.com/gatebridge/gatebridge/internal/hint"
	"github.com/gatebridge/gatebridge/internal/suggest"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/bwrap"
	"github.com/gatebridge/gatebridge/sandbox/docker"
	"github.com/gatebridge/gatebridge/sandbox/local"
)

// ExitInternal is gatebridge's own failure (bad config, sandbox unusable,
// session setup failed): the command did not run, or its result is unknown.
const ExitInternal = 125

// version and commit are set with -ldflags "-X main.version=… -X main.commit=…" ([buildinfo.Read]).
var version, commit string

func versionString() string { return buildinfo.Read(version, commit).Version }

// exitError carries the exit code of a command that ran.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// withHint is err with a hint for the user (hint.With).
func withHint(err error, h string) error { return hint.With(err, h) }

// usageError is a bad flag or missing argument (run --json kind config).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// jsonRequested reports whether run was asked for --json: from the parsed
// flag, or, when parsing stopped before it, from the raw arguments before
// "--".
func jsonRequested(c *cobra.Command, args []string) bool {
	if f := c.Flags().Lookup("json"); f != nil && f.Changed {
		return f.Value.String() == "true"
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--json" || a == "--json=true" || a == "--json=1" {
			return true
		}
	}
	return false
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd(stdin, stdout, stderr)
	root.SetArgs(args)
	c, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	if c != nil && c.Name() == "run" && c.Parent() == root && jsonRequested(c, args) {
		// run --json prints its result object even when gatebridge itself
		// failed, flag and usage errors included (nothing for the
		// command's own exit codes).
		printJSONError(stdout, err)
	} else if _, denied := cmdpolicy.IsDenied(err); denied && c.Name() == "exec" && jsonRequested(c, args) {
		printJSONError(stdout, err) // sandbox exec --json: the same object for a policy refusal
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if _, ok := cmdpolicy.IsDenied(err); ok {
		printError(stderr, err)
		return ExitPolicy
	}
	if hint.Of(err) == "" && strings.HasPrefix(err.Error(), "unknown command ") && c != nil {
		// cobra's own error, from outside the flag error func
		var word string
		fmt.Sscanf(err.Error(), "unknown command %q", &word)
		var names []string
		for _, sub := range c.Commands() {
			if !sub.Hidden {
				names = append(names, sub.Name())
			}
		}
		err = withHint(err, strings.TrimSpace(suggest.DidYouMean("", word, names)+" see '"+c.CommandPath()+" --help' for the commands"))
	}
	printError(stderr, err)
	return ExitInternal
}

// printError prints err, and on its own line the hint it carries (read
// with [hint.Of] only: every error type that has one implements Hint).
func printError(w io.Writer, err error) {
	fmt.Fprintf(w, "gatebridge: %v\n", err)
	if h := hint.Of(err); h != "" {
		fmt.Fprintf(w, "gatebridge: hint: %s\n", h)
	}
}

// app is what the commands of one invocation share: the sandbox
// backends this program offers and the configuration, which the root
// command loads once for every command that asks for it ([needsConfig]).
type app struct {
	backends *sandbox.Registry
	kinds    *gates.KindRegistry
	cfg      *Config
}

// annConfig marks a command that needs the configuration.
const annConfig = "gatebridge.config"

// needsConfig marks cmd so that the root command loads the configuration
// (with cmd's flags bound) before cmd runs.
func needsConfig(cmd *cobra.Command) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[annConfig] = "yes"
	return cmd
}

// newBackends is the sandbox backends gatebridge offers, registered here
// and nowhere else: local, bwrap, docker (the order auto breaks ties in,
// and help texts list them).
func newBackends() *sandbox.Registry {
	reg := sandbox.NewRegistry()
	for _, register := range []func(*sandbox.Registry) error{local.Register, bwrap.Register, docker.Register} {
		if err := register(reg); err != nil {
			panic(err) // a fresh registry has none of them yet
		}
	}
	return reg
}

// newKinds is the gate kinds gatebridge offers: package gates' own
// (builtin, command), then http and mcp, registered here and nowhere
// else. A new kind needs its Register call here and its config section
// (its keys in internal/config, its sources in gateSources).
func newKinds() *gates.KindRegistry {
	kinds := gates.NewKindRegistry()
	for _, register := range []func(*gates.KindRegistry) error{httpgate.Register, mcptools.Register} {
		if err := register(kinds); err != nil {
			panic(err) // a fresh registry has neither
		}
	}
	return kinds
}

func newRootCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	a := &app{backends: newBackends(), kinds: newKinds()}
	root := &cobra.Command{
		Use:           "gatebridge",
		Short:         "Let sandboxed shell commands call host-side tools through a filesystem mailbox",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildinfo.Read(version, commit).String(),
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Annotations[annConfig] == "" {
				return nil
			}
			path, _ := cmd.Flags().GetString("config")
			cfg, _, err := loadConfig(path, cmd.Flags(), a.backends)
			a.cfg = cfg
			return err
		},
	}
	root.SetVersionTemplate("{{.Version}}")
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().String("config", "", "config file (default $GATEBRIDGE_CONFIG, else $XDG_CONFIG_HOME/gatebridge/gatebridge.yaml; never the current directory)")
	root.DisableSuggestions = true // run() suggests, in a hint
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		h := "see '" + c.CommandPath() + " --help'"
		if ne := (*pflag.NotExistError)(nil); errors.As(err, &ne) && ne.GetSpecifiedShortnames() == "" {
			var names []string
			c.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
			h = strings.TrimSpace(suggest.DidYouMean("--", ne.GetSpecifiedName(), names) + " " + h)
		}
		return &usageError{withHint(err, h)}
	})
	root.AddCommand(
		newRunCmd(a),
		newGatesCmd(a),
		newDoctorCmd(a),
		newSandboxCmd(a),
		newPruneCmd(a),
		newBenchCmd(a),
		newServeCmd(a),
		newMCPCmd(a),
		newPromptCmd(a),
		newConfigCmd(a),
		newPolicyCmd(a),
		newGrantsCmd(a),
		newAgentCmd(),
		newVersionCmd(),
	)
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, the commit and the Go that built gatebridge",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := io.WriteString(cmd.OutOrStdout(), cmd.Root().Version)
			return err
		},
	}
}
