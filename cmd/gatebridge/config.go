package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/gatebridge/gatebridge/bridge/cmdpolicy"
	"github.com/gatebridge/gatebridge/gates/mcptools"
	"github.com/gatebridge/gatebridge/gates/secrets"
	"github.com/gatebridge/gatebridge/internal/config"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/bwrap"
	"github.com/gatebridge/gatebridge/sandbox/docker"

	"github.com/spf13/pflag"
)

// Config is every setting of gatebridge (internal/config) and what cmd
// makes of it once loaded.
type Config struct {
	config.Config
	// secrets holds the secrets section once checked; nil when there are none.
	secrets *secrets.Store
	// policy is policy.commands compiled; nil without it (allows all).
	policy *cmdpolicy.Policy

	// configFile is the resolved path of the config file read, if any;
	// configGiven the absolute path it was named by.
	configFile, configGiven string
}

// configError is a bad configuration; it names the key and says how to fix it.
type configError = config.Error

// autoBackend is the sandbox.backend that picks a registered backend.
const autoBackend = config.AutoBackend

// loadConfig loads the config (config.Load: the file, the env and the
// flags), compiles its command policy, checks its secrets (scrubbing env
// secrets' variables) and refuses a file the sandbox can reach
// (config.CheckPlace). backends are the sandbox backends sandbox.backend
// may name.
func loadConfig(path string, flags *pflag.FlagSet, backends *sandbox.Registry) (*Config, string, error) {
	l, used, err := config.Load(path, flags, configBackends(backends))
	if err != nil {
		return nil, used, err
	}
	cfg := &Config{Config: *l.Config}
	if cfg.policy, err = cfg.CompilePolicy(); err != nil {
		return nil, used, err
	}
	if cfg.secrets, err = cfg.LoadSecrets(l.Data); err != nil {
		return nil, used, err
	}
	if used != "" {
		if err := cfg.CheckPlace(used, l.Real); err != nil {
			return nil, used, err
		}
		cfg.configFile = l.Real
		cfg.configGiven, _ = filepath.Abs(used)
	}
	return cfg, used, nil
}

// backendDefaults are the defaults of the keys a backend package holds.
var backendDefaults = map[string]any{
	"sandbox.docker.pull":         docker.PullMissing,
	"sandbox.docker.pull_timeout": docker.DefaultPullTimeout.String(),
	"sandbox.gate_uid":            bwrap.GateUID,
	"sandbox.gate_gid":            bwrap.GateUID,
}

// configBackends is what the config needs of the backends: their names,
// backendDefaults, and checkBackendConfig.
func configBackends(reg *sandbox.Registry) config.Registered {
	return config.Registered{Registry: reg, Defaults: backendDefaults, Check: checkBackendConfig, DefaultMaxTools: mcptools.DefaultMaxTools}
}

// checkBackendConfig checks the keys only a backend package knows.
func checkBackendConfig(c *config.Config) error {
	bad := func(key, msg, hint string) error { return &configError{Key: key, Msg: msg, Help: hint} }
	if d := c.Sandbox.Docker; d.Pull != docker.PullMissing && d.Pull != docker.PullNever {
		return bad("sandbox.docker.pull", fmt.Sprintf("unknown policy %q", d.Pull), "use missing (pull an image that is not present) or never")
	}
	if c.Sandbox.Docker.PullTimeout < 0 {
		return bad("sandbox.docker.pull_timeout", "must not be negative", "a duration such as 10m (0: the default)")
	}
	if err := docker.ValidateImages(c.Sandbox.Docker.Images); err != nil {
		return bad(docker.ImagesKey, strings.TrimPrefix(err.Error(), docker.ImagesKey+": "),
			"list exact references (ubuntu:24.04, registry.example/team/tool@sha256:…) or REPO:* for any tag or digest of a repository")
	}
	return nil
}
