package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gatebridge/gatebridge/internal/bench"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/docker"
	"github.com/gatebridge/gatebridge/sandbox/local"
)

func newBenchCmd(a *app) *cobra.Command {
	var o bench.Options
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "bench [flags]",
		Short: "Measure the round trip, throughput, CPU and memory of gate calls",
		Long: `Measure gate calls from inside the chosen sandbox, side by side in one run:

  round trip  N sequential gb_echo calls from one bash loop (p50, p99, calls/s)
  wrapper alone
              the same gb_echo wrapper against a mailbox no host watches,
              its answer already written: the shell's own share of a call
  floor       the same loop calling a script with the wrapper's unavoidable
              process starts (sh, mkdir, cat) and no IPC; interleaved with
              the round trip call by call
  poll        the round trip with bridge.watch=poll at 10ms
  parallel    K callers x M calls, every output checked
  slow gate   calls to a gate that sleeps 200ms: wall and CPU per call
  http gate   GET requests to a server on 127.0.0.1 through the http gate,
              against curl to it from the host (no sandbox has a network)
  session     'gatebridge run -- true' against 'sh -c true' (medians)
  memory      host RSS after the first and after all memory calls

The bridge runs in this process; the sandboxed loops need bash.`,
		Example: `  gatebridge bench
  gatebridge bench --sandbox bwrap --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd, a, o, asJSON)
		},
	}
	f := cmd.Flags()
	f.String("sandbox", local.Name, "sandbox backend: "+strings.Join(a.backends.Names(), ", ")+" (auto means "+local.Name+")")
	f.String("image", "", "docker image (docker backend)")
	f.String("runtime", "", "OCI runtime of the docker engine (docker backend; config sandbox.docker.runtime)")
	f.IntVarP(&o.N, "calls", "n", 300, "sequential calls for the round trip and the floor")
	f.IntVarP(&o.K, "callers", "k", 8, "parallel callers")
	f.IntVarP(&o.M, "calls-each", "m", 125, "calls per parallel caller")
	f.IntVar(&o.PollN, "poll-calls", 100, "sequential calls in poll mode")
	f.IntVar(&o.SlowN, "slow-calls", 10, "calls to the 200ms gate")
	f.IntVar(&o.HTTPN, "http-calls", 100, "requests through the http gate, and with curl (0 skips the row)")
	f.IntVar(&o.SessionN, "session-runs", 11, "runs of 'run -- true' and 'sh -c true'")
	f.IntVar(&o.MemFirst, "mem-first", 1000, "calls before the first RSS sample")
	f.IntVar(&o.MemCalls, "mem-calls", 10000, "calls before the second RSS sample (0 skips the memory row)")
	f.IntVar(&o.MemWorkers, "mem-callers", 4, "parallel callers making the memory calls")
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	return needsConfig(cmd)
}

// runBench measures with the configured backend (auto means local) and
// prints the report.
func runBench(cmd *cobra.Command, a *app, o bench.Options, asJSON bool) (retErr error) {
	if err := o.Validate(); err != nil {
		return withHint(err, "see 'gatebridge bench --help'")
	}
	cfg := a.cfg
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	// SIGINT/SIGTERM stop the sandboxed loops and still run the cleanup
	// (workspace, sessions, containers) instead of killing us.
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	defer func() {
		if ctx.Err() != nil && cmd.Context().Err() == nil {
			fmt.Fprintln(stderr, "gatebridge: bench: interrupted")
			retErr = &exitError{sandbox.ExitCanceled}
		}
	}()
	if cfg.Sandbox.Backend == autoBackend {
		cfg.Sandbox.Backend = local.Name
	}
	chosen, err := chooseBackend(ctx, cfg, a.backends, stderr)
	if err != nil {
		return err
	}
	defer chosen.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	runCmd := []string{self, "run", "--sandbox", chosen.Backend.Name()}
	if img := cfg.Sandbox.Docker.Image; img != "" && chosen.Entry.Name == docker.Name {
		runCmd = append(runCmd, "--image", img)
	}
	env := bench.Env{
		Backend:         chosen.Backend,
		InsideWorkspace: chosen.InsideWorkspace,
		SessionDir:      cfg.Bridge.SessionDir,
		Limits:          cfg.BridgeLimits(),
		RescanInterval:  cfg.Bridge.RescanInterval,
		RunCommand:      runCmd,
	}
	if root := chosen.SessionsRoot(); root != "" {
		env.SessionDir = root
	}
	if !asJSON {
		env.Progress = func(what string) { fmt.Fprintf(stderr, "gatebridge: bench: %s…\n", what) }
	}
	rep, err := bench.Run(ctx, env, o)
	if err != nil {
		return err // after an interrupt, the deferred check reports it
	}
	rep.Command = "gatebridge " + strings.Join(os.Args[1:], " ")
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	rep.Print(stdout)
	return nil
}
