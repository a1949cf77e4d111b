package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/gatebridge/gatebridge/internal/hint"
)

// secretChecks are doctor's lines for the secrets: each read (command
// sources run) and said to resolve or not; never a value.
func secretChecks(ctx context.Context, cfg *Config) []checkResult {
	var out []checkResult
	ws, _ := resolveWorkspace(cfg.Sandbox.Workspace)
	errs := cfg.secrets.Check(ctx, untrustedDirs(cfg, ws))
	for _, name := range cfg.secrets.Names() {
		src, _ := cfg.secrets.Source(name)
		c := checkResult{Check: "secret " + name, Status: statusOK, Detail: "resolves (" + src.String() + ")"}
		if err := errs[name]; err != nil {
			c.Status, c.Detail = statusProblem, fmt.Sprintf("does not resolve (%s): %v", src, errors.Unwrap(err))
			c.Hint = hint.Of(err)
		}
		out = append(out, c)
	}
	return out
}
