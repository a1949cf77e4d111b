package main

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/bwrap"
	"github.com/gatebridge/gatebridge/sandbox/docker"
)

// autoBackend is the sandbox.backend that picks a registered backend.
const autoBackend = "auto"

// backendChoices is the sandbox.backend values, for help texts and hints:
// "auto, local, bwrap or docker".
func backendChoices(reg *sandbox.Registry) string {
	names := append([]string{autoBackend}, reg.Names()...)
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// chosenBackend is the backend a run uses, why, and what to release.
type chosenBackend struct {
	backend      sandbox.Backend
	entry        sandbox.BackendEntry
	reason       string
	sessionsRoot string // persistent docker: sessions must live here
	// reuseWorkspace is the host workspace a persistent sandbox was
	// started with, symlinks resolved ("" when unknown or none).
	reuseWorkspace string
	closers        []func()
}

func (c *chosenBackend) close() {
	for _, f := range c.closers {
		f()
	}
}

// insideWorkspace is where the sandbox sees the host workspace ("" when
// it does not).
func (c *chosenBackend) insideWorkspace(host string) string {
	if m, ok := c.backend.(sandbox.WorkspaceMapper); ok {
		in, _ := m.WorkspaceInside(host)
		return in
	}
	return host
}

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
	dc.Agent = agentBinary()
	if dc.Agent == "" {
		dc.Agent = docker.AgentSh
	}
	return dc
}

// agentBinary is this executable when it can run in any Linux image (a
// static ELF for this architecture, as `make build` makes it): persistent
// docker sandboxes then run it as their agent. "" otherwise: they run the
// sh agent in the image's /bin/sh (a few process starts more per command;
// the same isolation).
var agentBinary = sync.OnceValue(func() string {
	if runtime.GOOS != "linux" {
		return ""
	}
	self, err := os.Executable()
	if err != nil {
		return ""
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		return ""
	}
	f, err := elf.Open(self)
	if err != nil {
		return ""
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			return ""
		}
	}
	return self
})

func newDocker(cfg *Config) (*docker.Backend, error) {
	return docker.New(dockerConfig(cfg))
}

// backendSettings is the configuration as the backends' constructors read
// it.
func backendSettings(cfg *Config) sandbox.Settings {
	return sandbox.Settings{
		Limits:  sandboxLimits(cfg),
		Runtime: cfg.Sandbox.Docker.Runtime,
		Extra: map[string]any{
			bwrap.Name:  bwrap.Backend{Path: cfg.Sandbox.Bwrap.Path, ReadOnly: cfg.Sandbox.Bwrap.ReadOnly},
			docker.Name: dockerConfig(cfg),
		},
	}
}

// chooseBackend builds the configured backend; "auto" takes the first
// registered backend that can run here, strongest isolation first (docker
// with its image present, then bwrap). auto fails closed: it falls back
// to an unsandboxed backend (with a warning) only when
// sandbox.allow_unsandboxed is set; otherwise no usable sandbox is an
// error saying why.
func chooseBackend(ctx context.Context, cfg *Config, backends *sandbox.Registry, stderr io.Writer) (*chosenBackend, error) {
	if cfg.Sandbox.Docker.Reuse != "" {
		return choosePersistent(ctx, cfg, backends)
	}
	s := backendSettings(cfg)
	var chosen *chosenBackend
	if cfg.Sandbox.Backend == autoBackend {
		b, e, why, err := chooseAuto(ctx, cfg, backends, s)
		if err != nil {
			return nil, err
		}
		if rt := cfg.Sandbox.Docker.Runtime; rt != "" && e.Name != docker.Name {
			sandbox.Close(b) // an OCI runtime asked for: never quietly a weaker sandbox
			return nil, &sandbox.Error{Backend: docker.Name, Op: "choose backend",
				Err:  fmt.Errorf("%w: sandbox.docker.runtime is %s, but docker cannot run (%s)", sandbox.ErrUnavailable, rt, why),
				Help: "fix docker (see `gatebridge doctor`), or unset sandbox.docker.runtime to let auto pick another backend"}
		}
		chosen = &chosenBackend{backend: b, entry: e, reason: "auto: " + why}
		if e.Strength == 0 {
			fmt.Fprintf(stderr, "gatebridge: warning: no sandbox available (%s); the command runs UNSANDBOXED on the host\n", why)
			fmt.Fprintf(stderr, "gatebridge: hint: install bubblewrap or start Docker with the image present; sandbox.allow_unsandboxed allowed this\n")
		}
	} else {
		e, err := backends.Lookup(cfg.Sandbox.Backend)
		if err != nil {
			return nil, err // Validate refused it already
		}
		b, err := e.New(s)
		if err != nil {
			return nil, err
		}
		chosen = &chosenBackend{backend: b, entry: e, reason: "chosen with sandbox.backend=" + e.Name}
	}
	chosen.closers = []func(){func() { sandbox.Close(chosen.backend) }}
	if chosen.entry.Prepare != nil {
		if err := chosen.entry.Prepare(ctx, chosen.backend); err != nil {
			chosen.close()
			return nil, imageHintCLI(err)
		}
	}
	return chosen, nil
}

// chooseAuto is what --sandbox auto picks (run and doctor): the first
// registered backend that can run here, strongest isolation first; no
// usable one is a [noSandboxError] with a hint.
func chooseAuto(ctx context.Context, cfg *Config, backends *sandbox.Registry, s sandbox.Settings) (sandbox.Backend, sandbox.BackendEntry, string, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	b, e, why, err := backends.Auto(cctx, s, cfg.Sandbox.AllowUnsandboxed)
	if err != nil && errors.Is(err, sandbox.ErrUnavailable) && ctx.Err() == nil {
		err = withHint(&noSandboxError{why},
			"install bubblewrap, or start Docker with the image present (make test-image); to run on the host without a sandbox, pass --sandbox local or set sandbox.allow_unsandboxed: true")
	}
	return b, e, why, err
}

// choosePersistent is the persistent docker sandbox sandbox.docker.reuse.
func choosePersistent(ctx context.Context, cfg *Config, backends *sandbox.Registry) (*chosenBackend, error) {
	if cfg.Sandbox.Backend != autoBackend && cfg.Sandbox.Backend != docker.Name {
		return nil, &configError{Key: "sandbox.docker.reuse", Msg: "needs the docker backend",
			Help: "drop --sandbox " + cfg.Sandbox.Backend + " or --reuse"}
	}
	e, err := backends.Lookup(docker.Name)
	if err != nil {
		return nil, err
	}
	b, err := e.New(backendSettings(cfg))
	if err != nil {
		return nil, err
	}
	r, ok := b.(sandbox.Reopener)
	if !ok {
		sandbox.Close(b)
		return nil, fmt.Errorf("backend %s cannot reopen a sandbox by name", e.Name)
	}
	sb, err := r.OpenSandbox(ctx, cfg.Sandbox.Docker.Reuse)
	if err != nil {
		sandbox.Close(b)
		return nil, err
	}
	return &chosenBackend{backend: sb, entry: e, reason: "persistent sandbox " + cfg.Sandbox.Docker.Reuse,
		sessionsRoot:   sb.SessionsRoot(),
		reuseWorkspace: persistentWorkspace(sb),
		closers:        []func(){func() { sandbox.Close(b) }}}, nil
}

// noSandboxError is auto finding neither docker nor bwrap usable; it is
// an [sandbox.ErrUnavailable] (run --json kind sandbox_unavailable).
type noSandboxError struct{ why string }

func (e *noSandboxError) Error() string {
	return fmt.Sprintf("no sandbox is usable (%s); --sandbox auto does not run commands unsandboxed", e.why)
}
func (e *noSandboxError) Unwrap() error { return sandbox.ErrUnavailable }

// persistentWorkspace is the host workspace sb was started with, symlinks
// resolved, or "" (none). It comes from the labels Open read: no second
// request to the engine.
func persistentWorkspace(sb sandbox.Persistent) string {
	ws := sb.Workspace()
	if ws == "" {
		return ""
	}
	if r, err := filepath.EvalSymlinks(ws); err == nil {
		return r
	}
	return filepath.Clean(ws)
}
