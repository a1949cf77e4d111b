package config

import (
	"testing"

	"github.com/spf13/pflag"
)

// A key whose default a backend package holds (Registered.Defaults) is
// still said to come from the env when the env sets it.
func TestSourceOfBackendKey(t *testing.T) {
	t.Setenv("GATEBRIDGE_SANDBOX_DOCKER_PULL", "never")
	t.Setenv("GATEBRIDGE_SANDBOX_TIMEOUT", "5s")
	src := SourceOf("", "", pflag.NewFlagSet("t", pflag.ContinueOnError), Registered{Defaults: map[string]any{"sandbox.docker.pull": "missing"}})
	for key, want := range map[string]string{
		"sandbox.docker.pull": "env GATEBRIDGE_SANDBOX_DOCKER_PULL",
		"sandbox.timeout":     "env GATEBRIDGE_SANDBOX_TIMEOUT",
		"sandbox.kill_grace":  "default",
	} {
		if got := src(key); got != want {
			t.Errorf("%s: %q, want %q", key, got, want)
		}
	}
}
