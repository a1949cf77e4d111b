package main

import (
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gatebridge/gatebridge/sandbox/agent"
)

func newAgentCmd() *cobra.Command {
	var dir string
	var printSh bool
	cmd := &cobra.Command{
		Use:   "agent --dir DIR",
		Short: "Run inside a long-lived sandbox: start the commands gatebridge asks for through DIR",
		Long: `Run inside a long-lived sandbox, as its entrypoint: start the commands the
host's gatebridge writes to DIR/req/, and report their output and exit
status in DIR/out/ (which gatebridge reads as hostile input). No socket and
no exec API: the sandbox needs only DIR shared with gatebridge (a bind mount,
or a volume of a Kubernetes pod with gatebridge as a sidecar). DIR/req/ must
be read-only to the sandbox.

gatebridge's docker backend starts persistent sandboxes with this agent.
In a pod, point it at the shared volume's agent directory:
gatebridge serve --attach ROOT on the sidecar serves ROOT/agent.

As PID 1 it reaps every orphan. SIGTERM or SIGINT kill every command it
started, then end it. --print-sh prints the same agent in POSIX sh.`,
		Example: `  gatebridge agent --dir /gatebridge/agent`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if printSh {
				io.WriteString(cmd.OutOrStdout(), agent.ShScript+"\n")
				return nil
			}
			if dir == "" {
				return &usageError{withHint(errors.New("agent: --dir is required"), "the directory gatebridge shares with this sandbox, e.g. --dir /gatebridge/agent")}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			stderr := cmd.ErrOrStderr()
			return agent.Serve(ctx, agent.Options{Dir: dir, Version: versionString(),
				Logf: func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }})
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the agent directory shared with gatebridge (req/ and out/)")
	cmd.Flags().BoolVar(&printSh, "print-sh", false, "print the same agent in POSIX sh, for images where this binary cannot run: sh -c \"$(cat agent.sh)\" gatebridge-agent DIR (needs setsid, env, touch, mv in the image)")
	return cmd
}
