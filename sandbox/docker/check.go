package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/moby/moby/client"
)

// PingTimeout bounds [Backend.Ping].
const PingTimeout = 3 * time.Second

// Ping checks that the engine answers within [PingTimeout] (and negotiates
// the API version). Failures are [*sandbox.Error] wrapping
// [sandbox.ErrUnavailable] with a hint about DOCKER_HOST or the docker group.
func (b *Backend) Ping(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, PingTimeout)
	defer cancel()
	if _, err := b.cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		e := engineError("reach engine", err).(*sandbox.Error)
		if !errors.Is(e, sandbox.ErrUnavailable) {
			e.Err = fmt.Errorf("%w: %w", sandbox.ErrUnavailable, err)
		}
		if e.Help == "" {
			e.Help = "is the docker engine running? set DOCKER_HOST to its socket (e.g. unix:///var/run/docker.sock)"
		}
		return e
	}
	return nil
}

// ImagePresent reports whether the configured image exists locally.
func (b *Backend) ImagePresent(ctx context.Context) (bool, error) {
	_, err := b.cli.ImageInspect(ctx, b.cfg.Image)
	switch {
	case err == nil:
		return true, nil
	case cerrdefs.IsNotFound(err):
		return false, nil
	default:
		return false, engineError("inspect image "+b.cfg.Image, err)
	}
}

// Check implements [sandbox.Checker]: the engine answers and the image is
// present, trying a pull (progress on [Config.PullProgress]) when it is
// not.
func (b *Backend) Check(ctx context.Context) error {
	if err := b.Ping(ctx); err != nil {
		return err
	}
	if err := b.checkRuntime(ctx); err != nil {
		return err
	}
	if err := b.checkLimits(ctx, b.cfg.Memory, b.cfg.NanoCPUs, b.cfg.PidsLimit); err != nil {
		return err
	}
	ok, err := b.ImagePresent(ctx)
	if err != nil {
		return err
	}
	if ok {
		_, err := b.crossing(ctx)
		return err
	}
	fmt.Fprintf(b.cfg.PullProgress, "gatebridge: image %s not found locally, pulling\n", b.cfg.Image)
	if perr := b.pull(ctx); perr != nil {
		return &sandbox.Error{Backend: "docker", Op: "pull image " + b.cfg.Image,
			Err:  fmt.Errorf("%w: %w: image %s is not present and pulling it failed: %w", sandbox.ErrUnavailable, sandbox.ErrImageMissing, b.cfg.Image, perr),
			Help: imageHint(b.cfg.Image)}
	}
	_, err = b.crossing(ctx)
	return err
}

func (b *Backend) pull(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	resp, err := b.cli.ImagePull(pctx, b.cfg.Image, client.ImagePullOptions{})
	if err != nil {
		return err
	}
	defer resp.Close()
	for msg, err := range resp.JSONMessages(pctx) {
		if err != nil {
			return err
		}
		if msg.Error != nil {
			return errors.New(msg.Error.Message)
		}
		line := msg.Status
		if msg.ID != "" {
			line = msg.ID + ": " + line
		}
		if p := msg.Progress; p != nil && p.Total > 0 {
			line += fmt.Sprintf(" %d/%d", p.Current, p.Total)
		}
		_, _ = io.WriteString(b.cfg.PullProgress, line+"\n")
	}
	return nil
}
