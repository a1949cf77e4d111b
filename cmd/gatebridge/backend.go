package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/docker"
)

// chosenBackend is the backend a run uses, why, and what to release.
type chosenBackend struct {
	backend      sandbox.Backend
	reason       string
	sessionsRoot string // persistent docker: sessions must live here
	workspaceIn  string // where the sandbox sees the workspace ("" = same path)
	// mapWorkspace, when set, maps the host workspace inside (persistent
	// docker: the run may start in a subdirectory of the sandbox's).
	mapWorkspace func(host string) (string, bool)
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

func (c *chosenBackend) insideWorkspace(host string) string {
	if c.mapWorkspace != nil {
		if in, ok := c.mapWorkspace(host); ok {
			return in
		}
		return ""
	}
	if c.workspaceIn != "" {
		return c.workspaceIn
	}
	return host
}

func dockerConfig(cfg *Config) docker.Config {
	d, l := cfg.Sandbox.Docker, cfg.Sandbox.Limits
	dc := docker.Config{
		Image: d.Image, User: d.User, Memory: l.Memory, PidsLimit: l.Pids,
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
	return dc
}

func newDocker(cfg *Config) (*docker.Backend, error) {
	return docker.New(dockerConfig(cfg))
}

// chooseBackend builds the configured backend; for "auto" it tries docker
// (engine reachable and image present), then bwrap. auto fails closed: it
// falls back to local (with a warning) only when sandbox.allow_unsandboxed
// is set; otherwise no usable sandbox is an error saying why.
func chooseBackend(ctx context.Context, cfg *Config, stderr io.Writer) (*chosenBackend, error) {
	bw := &sandbox.Bwrap{Path: cfg.Sandbox.Bwrap.Path, ReadOnly: cfg.Sandbox.Bwrap.ReadOnly}
	if cfg.Sandbox.Docker.Reuse != "" {
		if cfg.Sandbox.Backend != "auto" && cfg.Sandbox.Backend != "docker" {
			return nil, &configError{Key: "sandbox.docker.reuse", Msg: "needs the docker backend",
				Hint: "drop --sandbox " + cfg.Sandbox.Backend + " or --reuse"}
		}
		d, err := newDocker(cfg)
		if err != nil {
			return nil, err
		}
		sb, err := d.Open(ctx, cfg.Sandbox.Docker.Reuse)
		if err != nil {
			d.Close()
			return nil, err
		}
		return &chosenBackend{backend: sb, reason: "persistent sandbox " + cfg.Sandbox.Docker.Reuse,
			sessionsRoot: sb.SessionsRoot(), mapWorkspace: sb.WorkspaceInside,
			reuseWorkspace: persistentWorkspace(ctx, d, cfg.Sandbox.Docker.Reuse),
			closers:        []func(){func() { d.Close() }}}, nil
	}
	switch cfg.Sandbox.Backend {
	case "local":
		return &chosenBackend{backend: sandbox.NewLocal(), reason: "chosen with sandbox.backend=local"}, nil
	case "bwrap":
		// No Check here: it runs bwrap once more (~10-20 ms), and Run
		// diagnoses a sandbox that cannot be set up the same way.
		return &chosenBackend{backend: bw, reason: "chosen with sandbox.backend=bwrap"}, nil
	case "docker":
		d, err := newDocker(cfg)
		if err != nil {
			return nil, err
		}
		if err := d.Check(ctx); err != nil {
			d.Close()
			return nil, imageHintCLI(err, d.Config().Image)
		}
		reapContainers(ctx, d)
		return &chosenBackend{backend: d, reason: "chosen with sandbox.backend=docker", workspaceIn: docker.DefaultWorkspacePath,
			closers: []func(){func() { d.Close() }}}, nil
	}
	// auto
	var candidates []sandbox.Backend
	var closers []func()
	dockerWhy := "" // docker could not even be set up
	if d, err := newDocker(cfg); err == nil {
		candidates = append(candidates, autoDocker{d})
		closers = append(closers, func() { d.Close() })
	} else {
		dockerWhy = "docker: " + strings.TrimPrefix(err.Error(), "docker: ") + "; "
	}
	candidates = append(candidates, bw)
	if cfg.Sandbox.AllowUnsandboxed {
		candidates = append(candidates, sandbox.NewLocal())
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	b, why, err := sandbox.Auto(cctx, candidates)
	if err != nil {
		for _, f := range closers {
			f()
		}
		if errors.Is(err, sandbox.ErrUnavailable) && ctx.Err() == nil {
			return nil, withHint(&noSandboxError{dockerWhy + why},
				"install bubblewrap, or start Docker with the image present (make test-image); to run on the host without a sandbox, pass --sandbox local or set sandbox.allow_unsandboxed: true")
		}
		return nil, err
	}
	chosen := &chosenBackend{backend: b, reason: "auto: " + why, closers: closers}
	if ad, ok := b.(autoDocker); ok {
		reapContainers(ctx, ad.Backend)
		chosen.backend = ad.Backend
		chosen.workspaceIn = docker.DefaultWorkspacePath
	}
	if b.Name() == "local" {
		fmt.Fprintf(stderr, "gatebridge: warning: no sandbox available (%s); the command runs UNSANDBOXED on the host\n", why)
		fmt.Fprintf(stderr, "gatebridge: hint: install bubblewrap or start Docker with the image present; sandbox.allow_unsandboxed allowed this\n")
	}
	return chosen, nil
}

// autoDocker is docker as an auto candidate: usable only when the engine
// answers and the image is already present (auto never pulls).
type autoDocker struct{ *docker.Backend }

func (a autoDocker) Check(ctx context.Context) error {
	if err := a.Backend.Ping(ctx); err != nil {
		return err
	}
	ok, err := a.Backend.ImagePresent(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return &sandbox.Error{Backend: "docker", Op: "find image", Err: fmt.Errorf("%w: image %s not present", docker.ErrImageMissing, a.Backend.Config().Image),
			Hint: "build it with `make test-image` or set sandbox.docker.image"}
	}
	return nil
}

// reapContainers removes per-command containers whose gatebridge died
// (kill -9, OOM): every docker run starts by cleaning up after those.
func reapContainers(ctx context.Context, d *docker.Backend) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d.Prune(rctx, docker.PruneOptions{})
}

// noSandboxError is auto finding neither docker nor bwrap usable; it is
// an [sandbox.ErrUnavailable] (run --json kind sandbox_unavailable).
type noSandboxError struct{ why string }

func (e *noSandboxError) Error() string {
	return fmt.Sprintf("no sandbox is usable (%s); --sandbox auto does not run commands unsandboxed", e.why)
}
func (e *noSandboxError) Unwrap() error { return sandbox.ErrUnavailable }

// persistentWorkspace is the host workspace persistent sandbox name was
// started with, symlinks resolved, or "" (none, or not found).
func persistentWorkspace(ctx context.Context, d *docker.Backend, name string) string {
	list, err := d.List(ctx)
	if err != nil {
		return ""
	}
	for _, i := range list {
		if i.Name == name && i.Workspace != "" {
			if r, err := filepath.EvalSymlinks(i.Workspace); err == nil {
				return r
			}
			return filepath.Clean(i.Workspace)
		}
	}
	return ""
}
