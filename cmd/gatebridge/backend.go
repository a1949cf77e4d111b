package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/internal/config"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/bwrap"
	"github.com/gatebridge/gatebridge/sandbox/docker"
)

func dockerConfig(cfg *Config) docker.Config {
	d, l := cfg.Sandbox.Docker, cfg.Sandbox.Limits
	dc := docker.Config{
		Image: d.Image, Images: d.Images, Pull: d.Pull, PullTimeout: d.PullTimeout, Runtime: d.Runtime, User: d.User, Memory: l.Memory, PidsLimit: l.Pids,
		Network: d.Network, TmpfsSize: l.TmpSize, WritableRootfs: d.WritableRootfs,
		AllowNewPrivileges: d.AllowNewPrivileges, CapAdd: d.CapAdd, NoInit: d.NoInit,
	}
	if l.CPUs > 0 {
		dc.NanoCPUs = int64(l.CPUs * 1e9)
	} else {
		dc.NanoCPUs = -1
	}
	if l.Memory == 0 {
		dc.Memory = -1
	}
	if l.Pids == 0 {
		dc.PidsLimit = -1
	}
	if c, err := os.UserCacheDir(); err == nil {
		dc.ProbeCache = filepath.Join(c, "gatebridge", "oci-runtimes.json")
	}
	dc.Agent = cmp.Or(docker.SelfAgent(), docker.AgentSh)
	return dc
}

func newDocker(cfg *Config) (*docker.Backend, error) {
	return docker.New(dockerConfig(cfg))
}

// backendSettings is the configuration as the backends' constructors read
// it.
func backendSettings(cfg *Config) sandbox.Settings {
	return sandbox.Settings{
		Limits:  cfg.SandboxLimits(),
		Runtime: cfg.Sandbox.Docker.Runtime,
		Extra: map[string]any{
			bwrap.Name:  bwrap.Backend{Path: cfg.Sandbox.Bwrap.Path, ReadOnly: cfg.Sandbox.Bwrap.ReadOnly},
			docker.Name: dockerConfig(cfg),
		},
	}
}

// howLocalCLI ends the hint when auto finds no usable backend.
const howLocalCLI = "pass --sandbox local or set sandbox.allow_unsandboxed: true"

// choice is the backend the config asks for, as control.Choose takes it.
func choice(cfg *Config) control.Choice {
	return control.Choice{Backend: cfg.Sandbox.Backend, Settings: backendSettings(cfg),
		AllowUnsandboxed: cfg.Sandbox.AllowUnsandboxed, HowLocal: howLocalCLI,
		RuntimeKey: "sandbox.docker.runtime"}
}

// chooseBackend builds the configured backend with control.Choose (the
// one choice every front end makes): "auto" fails closed, falling back
// to an unsandboxed backend (with a warning here) only when
// sandbox.allow_unsandboxed is set; sandbox.docker.reuse reopens a
// persistent docker sandbox.
func chooseBackend(ctx context.Context, cfg *Config, backends *sandbox.Registry, stderr io.Writer) (*control.Chosen, error) {
	ch := choice(cfg)
	if reuse := cfg.Sandbox.Docker.Reuse; reuse != "" {
		if cfg.Sandbox.Backend != autoBackend && cfg.Sandbox.Backend != docker.Name {
			return nil, &configError{Key: "sandbox.docker.reuse", Msg: "needs the docker backend",
				Help: "drop --sandbox " + cfg.Sandbox.Backend + " or --reuse"}
		}
		ch.Backend, ch.Reuse = docker.Name, reuse
	}
	c, err := control.Choose(ctx, backends, ch)
	if err != nil {
		return nil, cliChoiceError(err)
	}
	if c.Reason == "" {
		c.Reason = "chosen with sandbox.backend=" + c.Entry.Name
	} else if c.Entry.Strength == 0 && c.Persistent == nil && strings.HasPrefix(c.Reason, autoBackend+":") {
		fmt.Fprintf(stderr, "gatebridge: warning: no sandbox available (%s); the command runs UNSANDBOXED on the host\n", strings.TrimPrefix(c.Reason, autoBackend+": "))
		fmt.Fprintf(stderr, "gatebridge: hint: install bubblewrap or start Docker with the image present; sandbox.allow_unsandboxed allowed this\n")
	}
	return c, nil
}

// chooseAuto is what --sandbox auto picks (doctor): control.PickAuto, its
// failure worded for the CLI.
func chooseAuto(ctx context.Context, cfg *Config, backends *sandbox.Registry, s sandbox.Settings) (sandbox.Backend, sandbox.BackendEntry, string, error) {
	ch := choice(cfg)
	ch.Settings = s
	b, e, why, err := control.PickAuto(ctx, backends, ch)
	return b, e, why, cliChoiceError(err)
}

// cliChoiceError words a failed choice for the CLI: auto's refusal says
// the flag; an image error says how to build the test image.
func cliChoiceError(err error) error {
	if errors.Is(err, control.ErrNoSandbox) {
		return &noSandboxError{err}
	}
	if err != nil {
		return imageHintCLI(err)
	}
	return nil
}

// noSandboxError is auto finding neither docker nor bwrap usable; it is
// a [sandbox.ErrUnavailable] (run --json kind sandbox_unavailable) whose
// hint is control's.
type noSandboxError struct{ err error }

func (e *noSandboxError) Error() string {
	return e.err.Error() + "; --sandbox auto does not run commands unsandboxed"
}
func (e *noSandboxError) Unwrap() error { return e.err }

// reused is what the config's place checks need of a reopened sandbox
// (none: the zero value).
func reused(cfg *Config, c *control.Chosen) config.Reused {
	r := config.Reused{Name: cfg.Sandbox.Docker.Reuse, Workspace: c.ReusedWorkspace(), SessionsRoot: c.SessionsRoot()}
	if m, ok := c.Persistent.(sandbox.WorkspaceMapper); ok {
		r.Mapper = m
	}
	return r
}
