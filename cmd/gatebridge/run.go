package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/bridge/cmdpolicy"
	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/internal/config"
	"github.com/gatebridge/gatebridge/internal/hint"
	"github.com/gatebridge/gatebridge/internal/lossless"
	"github.com/gatebridge/gatebridge/internal/tty"
)

func newRunCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "run [flags] -- COMMAND [ARG...]",
		Short: "Run a command in a sandbox with the gates on its PATH",
		Long: `Run COMMAND in a sandbox with one wrapper per gate on its PATH.

The exit code is the command's; 124 when it timed out; 125 when gatebridge
itself failed (bad config, sandbox unavailable); 126 when policy.commands
refused the command before it started (gatebridge policy check says why).`,
		Example: `  gatebridge run -- bash -c 'read_file README.md | head -3'
  gatebridge run --json -- sh -c 'gb_echo hi; submit done'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return &usageError{withHint(errors.New("run: no command given"), "usage: gatebridge run [flags] -- COMMAND [ARG...]")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runCommand(cmd, args, asJSON) // with --json, main prints the error object
		},
	}
	f := cmd.Flags()
	f.String("sandbox", autoBackend, "sandbox backend: "+config.BackendChoices(a.backends))
	f.Duration("timeout", 0, "stop the command after this long (exit 124; default: config sandbox.timeout, 10m); 0 means no limit")
	f.String("workspace", "", "directory the command starts in and the gates see (default: current directory)")
	f.Bool("writable-workspace", false, "let the sandbox write the workspace (bwrap, docker)")
	f.Int64("max-output", 0, "bytes of stdout and stderr captured each for --json (head and tail kept)")
	f.Bool("keep-session", false, "keep the session directory and print its path (debugging)")
	f.String("image", "", "docker image (docker backend)")
	f.String("runtime", "", "OCI runtime of the docker engine, e.g. runsc for gVisor (docker backend)")
	f.String("reuse", "", "run inside the persistent docker sandbox NAME (see 'gatebridge sandbox start')")
	f.String("watch", "", "how the host notices calls: auto, events or poll")
	f.BoolVar(&asJSON, "json", false, "print one JSON object with the result instead of streaming output")
	cmd.Flags().SetInterspersed(false)
	// Flags without an explicit value must not override config: viper
	// only takes a bound flag's value when it was Changed.
	return needsConfig(cmd)
}

// jsonError is the "error" of run --json when gatebridge itself failed
// (exit 125): a runtime can tell its own failures from the command's.
type jsonError struct {
	Kind    string `json:"kind"` // config, sandbox_unavailable, image_missing, session, policy_denied, internal (docs/json.md)
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
}

// printJSONError prints the result object of a run that failed before or
// around the command, with exit_code 125 and the error; nothing for the
// command's own exit codes.
func printJSONError(w io.Writer, err error) {
	var ee *exitError
	if err == nil || errors.As(err, &ee) {
		return
	}
	// The same object as a run's result (every field, so a runtime can
	// decode both with one type), plus the error.
	code := ExitInternal
	if _, ok := cmdpolicy.IsDenied(err); ok {
		code = ExitPolicy
	}
	res := jsonResult{
		Result: &bridge.Result{ExitCode: code, Calls: []bridge.CallRecord{}},
		Error:  &jsonError{Kind: errorKind(err), Message: err.Error(), Hint: hint.Of(err)},
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(res)
}

// errorKind classifies a gatebridge failure for run --json: a bad config
// or usage is cmd's to name, the rest control's.
func errorKind(err error) string {
	var ce *configError
	var ue *usageError
	if _, denied := cmdpolicy.IsDenied(err); !denied && (errors.As(err, &ce) || errors.As(err, &ue)) {
		return "config"
	}
	return control.RunErrorKind(err)
}

// jsonResult is what run --json prints.
type jsonResult struct {
	*bridge.Result
	SandboxReason string `json:"sandbox_reason,omitempty"`
	// Error is set only when gatebridge itself failed (exit 125) or the
	// command policy refused the command (exit 126, kind policy_denied).
	Error *jsonError `json:"error,omitempty"`
}

// runCommand runs args in the configured sandbox (run, sandbox exec).
func (a *app) runCommand(cmd *cobra.Command, args []string, asJSON bool) error {
	cfg := a.cfg
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	policy, err := checkCommandPolicy(cfg, args) // before anything starts
	if err != nil {
		return err
	}
	workspace, err := config.ResolveWorkspace(cfg.Sandbox.Workspace)
	if err != nil {
		return err
	}
	if err := config.CheckWorkspacePath(workspace); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sig)

	chosen, err := chooseBackend(ctx, cfg, a.backends, stderr)
	if err != nil {
		if ctx.Err() != nil { // interrupted while checking backends
			return &exitError{signalCode(sig, stderr)}
		}
		return err
	}
	defer chosen.Close()
	if strings.HasPrefix(chosen.Reason, autoBackend+":") && tty.IsTerminal(stderr) { // --json has it as sandbox_reason
		fmt.Fprintf(stderr, "gatebridge: sandbox: %s (%s)\n", chosen.Entry.Name, chosen.Reason)
	}
	if workspace, err = cfg.WorkspaceInReused(workspace, reused(cfg, chosen)); err != nil {
		return err
	}
	if err := cfg.CheckPlaceInSandbox(cfg.configFile, cfg.configGiven, reused(cfg, chosen)); err != nil {
		return err
	}

	reg, _, err := buildRegistry(cmd.Context(), a.kinds, cfg, workspace, chosen.InsideWorkspace(workspace), func(w string) { fmt.Fprintf(stderr, "gatebridge: warning: %s\n", w) })
	if err != nil {
		return err
	}
	defer reg.Close() // stops the MCP servers
	var audit io.Writer
	if cfg.Audit.Path != "" {
		if err := cfg.CheckAuditPlace(workspace, reused(cfg, chosen)); err != nil {
			return err
		}
		f, err := cfg.OpenAudit()
		if err != nil {
			return err
		}
		defer f.Close()
		audit = f
	}
	decider, term, err := cfg.RunApprovals(reg, workspace, chosen.Entry.Strength == 0, cfg.policy, audit, cfg.secrets.Redactor().String)
	if err != nil {
		return err
	}
	if term != nil {
		defer term.Close()
	}
	if policy.Decision == cmdpolicy.Ask { // with the approval prompt (the command, the rule; y/n)
		if err := decider.DecideCommand(ctx, args, policy, "run", nil); err != nil {
			return err
		}
	}
	bcfg := cfg.SessionConfig()
	bcfg.Gates, bcfg.Keep, bcfg.Audit, bcfg.Sandbox = reg, cfg.Bridge.KeepSession, audit, cfg.Sandbox.Docker.Reuse
	bcfg.Redact = cfg.secrets.Redactor()
	bcfg.Logf = func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
	spec := cfg.SpecTemplate()
	spec.Command, spec.Workspace, spec.Stdin = args, workspace, termStdin(term, cmd.InOrStdin())
	spec.WorkspaceWritable = cfg.Sandbox.WritableWorkspace
	spec.UID, spec.GID = cfg.RunAs(workspace)
	if !asJSON {
		spec.Stdout, spec.Stderr = stdout, stderr
		if term != nil { // held while the person is asked
			spec.Stdout, spec.Stderr = term.Output(stdout), term.Output(stderr)
		}
	}
	res, err := control.Run(ctx, control.RunSpec{Chosen: chosen, Bridge: bcfg, Decider: decider, Process: spec,
		Kept: func(dir string) { fmt.Fprintf(stderr, "gatebridge: session kept at %s\n", dir) }})
	if err != nil {
		return err
	}
	if !asJSON && res.Answer != nil {
		// submit's answer is the command's result: show it (stderr, so
		// stdout stays the command's own), quoted as every string from
		// the sandbox is shown to a person (docs/json.md): a newline or an
		// escape sequence in it cannot pass for a line of gatebridge's.
		fmt.Fprintf(stderr, "gatebridge: answer: %s\n", lossless.Quote(*res.Answer))
	}
	if asJSON {
		if res.Calls == nil {
			res.Calls = []bridge.CallRecord{} // "calls": [], not null
		}
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(jsonResult{Result: res, SandboxReason: chosen.Reason}); err != nil {
			return err
		}
	}
	code := res.ExitCode
	if res.Canceled {
		code = signalCode(sig, stderr)
	} else if res.TimedOut { // said in --json mode too, as every diagnostic is
		fmt.Fprintf(stderr, "gatebridge: timed out after %v\n", cfg.Sandbox.Timeout)
	}
	if code != 0 {
		return &exitError{code}
	}
	return nil
}

// signalCode is 128+N for the signal that stopped the run (130 when it is
// not known); it says so on stderr.
func signalCode(sig <-chan os.Signal, stderr io.Writer) int {
	code := 130
	select {
	case s := <-sig:
		if n, ok := s.(syscall.Signal); ok {
			code = 128 + int(n)
		}
	default:
	}
	fmt.Fprintf(stderr, "gatebridge: interrupted by %s\n", unix.SignalName(syscall.Signal(code-128)))
	return code
}
