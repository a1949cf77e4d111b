package docker

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/gatebridge/gatebridge/sandbox"
)

// Name is the docker backend's name in a [sandbox.Registry].
const Name = "docker"

// Register adds the docker backend to reg. It is not registered by
// importing this package: a program that offers docker says so. Its
// constructor reads a [Config] from [sandbox.Settings].Extra[Name] (the
// defaults when absent), with [sandbox.Settings].Image and Runtime over its own.
func Register(reg *sandbox.Registry) error { return reg.Register(Entry()) }

// Entry describes the docker backend for a [sandbox.Registry]. auto
// prefers it (the strongest isolation) when the engine answers and the
// image is present; auto never pulls (whether auto picks docker does not
// depend on a registry). Once docker is chosen, Prepare pulls a missing
// image ([Backend.EnsureImage]).
func Entry() sandbox.BackendEntry {
	return sandbox.BackendEntry{
		Name:      Name,
		Summary:   "a container (a fresh one per run, one per sandbox under serve and mcp): own root filesystem, no network unless sandbox.docker.network, limits",
		Isolates:  "container: own root filesystem, no network, capabilities dropped, cgroup limits",
		Platforms: []string{"linux"},
		Images:    true,
		Runtimes:  true,
		Strength:  2,
		New: func(s sandbox.Settings) (sandbox.Backend, error) {
			cfg, _ := s.Extra[Name].(Config)
			// The configured image is the default, always allowed; an
			// image asked for (serve's sandbox/open) must pass
			// Config.Images.
			cfg.DefaultImage = cmp.Or(cfg.DefaultImage, cfg.Image, TestImage)
			cfg.Image = cmp.Or(s.Image, cfg.Image)
			cfg.Runtime = cmp.Or(s.Runtime, cfg.Runtime)
			return New(cfg)
		},
		Available: func(ctx context.Context, b sandbox.Backend) error { return b.(*Backend).available(ctx) },
		Openable:  func(ctx context.Context, b sandbox.Backend) error { return b.(*Backend).openable(ctx) },
		Prepare:   func(ctx context.Context, b sandbox.Backend) error { return b.(*Backend).prepare(ctx) },
		Doctor: func(ctx context.Context, b sandbox.Backend, _ sandbox.Settings) []sandbox.Finding {
			return b.(*Backend).doctor(ctx)
		},
	}
}

// available: the image is allowed, the engine answers and the image is
// already present (auto never pulls).
func (b *Backend) available(ctx context.Context) error {
	if _, err := b.policy.allow(b.cfg.Image); err != nil {
		return err
	}
	if err := b.Ping(ctx); err != nil {
		return err
	}
	ok, err := b.ImagePresent(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return &sandbox.Error{Backend: Name, Op: "find image",
			Err:  fmt.Errorf("%w: %w: image %s not present", sandbox.ErrUnavailable, sandbox.ErrImageMissing, b.cfg.Image),
			Help: imageHint(b.cfg.Image)}
	}
	if err := b.checkRuntime(ctx); err != nil {
		return err
	}
	_, err = b.crossing(ctx)
	return err
}

// openable: what docker chosen by name (serve's sandbox/open "docker")
// needs before Prepare: the image allowed, the engine answering, the OCI
// runtime known; an image that is not present passes when Prepare will
// pull it ([Backend.EnsureImage]).
func (b *Backend) openable(ctx context.Context) error {
	if b.cfg.Pull == PullNever {
		return b.available(ctx)
	}
	if _, err := b.policy.allow(b.cfg.Image); err != nil {
		return err
	}
	if err := b.Ping(ctx); err != nil {
		return err
	}
	return b.checkRuntime(ctx)
}

// prepare checks the engine and the image (pulling a missing one), then
// removes per-command containers and staging mounts whose gatebridge died
// (kill -9, OOM): every docker run starts by cleaning up after those.
func (b *Backend) prepare(ctx context.Context) error {
	if err := b.Check(ctx); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, _ = b.Prune(rctx, PruneOptions{}) // best effort: the run does not depend on it
	_, _ = PruneStaging()
	return nil
}

// WorkspaceInside is where every command's container sees the workspace
// ([Config.WorkspacePath]).
func (b *Backend) WorkspaceInside(string) (string, bool) { return b.cfg.WorkspacePath, true }

func (b *Backend) doctor(ctx context.Context) []sandbox.Finding {
	if err := b.Ping(ctx); err != nil {
		return []sandbox.Finding{sandbox.ProblemFinding("docker engine", err),
			{Check: "docker image", Status: sandbox.StatusProblem,
				Detail: "image " + b.cfg.Image + " not checked: the engine does not answer"}}
	}
	detail, engineOS := "reachable at "+b.cli.DaemonHost(), ""
	if info, err := b.cli.Info(ctx, client.InfoOptions{}); err == nil {
		engineOS = info.Info.OperatingSystem
		detail += " (" + engineOS + ", server " + info.Info.ServerVersion + ")"
	}
	out := []sandbox.Finding{{Check: "docker engine", Status: sandbox.StatusOK, Detail: detail}}
	pull := "run would pull it"
	if b.cfg.Pull == PullNever {
		pull = "sandbox.docker.pull is never"
	}
	switch present, err := b.ImagePresent(ctx); {
	case err != nil:
		out = append(out, sandbox.ProblemFinding("docker image", err))
	case !present:
		out = append(out, sandbox.Finding{Check: "docker image", Status: sandbox.StatusProblem,
			Detail: "image " + b.cfg.Image + " is not present locally (" + pull + "; auto skips docker)",
			Hint:   imageHint(b.cfg.Image)})
	default:
		out = append(out, sandbox.Finding{Check: "docker image", Status: sandbox.StatusOK, Detail: "image " + b.cfg.Image + " present"})
	}
	if f, ok := wakeFinding(engineOS); ok {
		out = append(out, f)
	}
	out = append(out, b.runtimeFindings(ctx)...)
	out = append(out, b.agentFinding(ctx))
	return out
}

// runtimeFindings lists the engine's OCI runtimes, each with what a probe
// container found, then whether the configured one is usable.
func (b *Backend) runtimeFindings(ctx context.Context) []sandbox.Finding {
	var out []sandbox.Finding
	reports, err := b.Runtimes(ctx)
	if err != nil {
		out = append(out, sandbox.ProblemFinding("docker OCI runtimes", err))
	}
	f := b.facts(ctx)
	if f.podman && f.err == nil {
		out = append(out, sandbox.Finding{Check: "docker OCI runtimes", Status: sandbox.StatusOK,
			Detail: "the engine is Podman: its Docker-compatible API runs every container with its default OCI runtime, " + f.defaultRT +
				" (containers.conf also names " + strings.Join(f.runtimeNames(), ", ") + ")"})
	}
	for _, r := range reports {
		out = append(out, runtimeFinding(r, b.runtimeName(f)))
	}
	if err := b.checkRuntime(ctx); err != nil {
		out = append(out, sandbox.ProblemFinding("docker OCI runtime "+b.cfg.Runtime, err))
	}
	return out
}

// runtimeFinding says what one probe found, and what gatebridge does
// about it.
func runtimeFinding(r RuntimeReport, chosen string) sandbox.Finding {
	f := sandbox.Finding{Check: "docker OCI runtime " + r.Name, Status: sandbox.StatusOK}
	var tags []string
	if r.Default {
		tags = append(tags, "the engine's default")
	}
	if r.Name == chosen {
		tags = append(tags, "gatebridge uses it")
	}
	head := r.Path
	if len(r.Args) > 0 {
		head += " " + strings.Join(r.Args, " ")
	}
	if len(tags) > 0 {
		head += " (" + strings.Join(tags, ", ") + ")"
	}
	if why := r.Usable(); why != "" {
		f.Status, f.Detail = sandbox.StatusProblem, head+": "+why
		f.Hint = "gatebridge cannot run sandboxes with it here; pick another with sandbox.docker.runtime (--runtime)"
		if strings.Contains(r.Err, "root network namespace") {
			// runsc's own network setup on some hosts (this VM): gatebridge's
			// containers need no network.
			f.Hint = "register it with runtimeArgs [\"--network=none\"] (.ci/docker-runtime " + r.Name + " " + r.Path + " --network=none)"
		}
		if r.Name != chosen {
			f.Status = sandbox.StatusWarn
		}
		return f
	}
	kernel := "the host's kernel " + r.Kernel
	if r.GVisor {
		kernel = "gVisor's kernel (uname " + r.Kernel + "), not the host's"
	}
	yes := func(ok bool, y, n string) string {
		if ok {
			return y
		}
		return n
	}
	f.Detail = fmt.Sprintf("%s: %s; started in %.0f ms; wake: %s; host inotify: %s; ACLs: %s", head, kernel, r.StartMS,
		yes(r.FIFO, fmt.Sprintf("FIFO (%.1f ms)", r.FIFOMS), fmt.Sprintf("poll (a FIFO does not cross; a response is seen in %.0f ms)", r.PollMS)),
		yes(r.Events, "sees the container's writes", "blind (the host scans calls/)"),
		yes(r.ACL, "honoured", "ignored (sessions handed over by ownership)"))
	return f
}

// agentFinding says how persistent sandboxes will run their commands.
func (b *Backend) agentFinding(ctx context.Context) sandbox.Finding {
	f := sandbox.Finding{Check: "docker persistent sandboxes", Status: sandbox.StatusOK}
	switch {
	case b.cfg.Agent == "":
		f.Detail = "commands through the engine's exec API"
	case b.usePoll(ctx):
		f.Detail = "commands through the engine's exec API: FIFOs do not reach the containers, so no agent"
	case b.cfg.Agent == AgentSh:
		f.Detail = "commands through the sh agent in the image's /bin/sh (this gatebridge is not statically linked; `make build` links it so)"
	default:
		f.Detail = "commands through gatebridge agent (" + b.cfg.Agent + ", mounted read-only), no exec API"
	}
	return f
}

// wakeFinding warns that FIFO wake-ups do not cross Docker Desktop's VM.
func wakeFinding(engineOS string) (sandbox.Finding, bool) {
	if !isDockerDesktop(engineOS) {
		return sandbox.Finding{}, false
	}
	return sandbox.Finding{Check: "docker wake", Status: sandbox.StatusWarn,
		Detail: "FIFOs do not cross Docker Desktop's VM: docker sandboxes poll for responses (slower calls)"}, true
}
