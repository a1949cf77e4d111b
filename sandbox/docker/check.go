package docker

import (
	"context"
	"errors"
	"fmt"
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

// Check implements [sandbox.Checker]: the engine answers, the OCI runtime
// and limits work, and the image is allowed and present, pulled when it
// is not ([Backend.EnsureImage]).
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
	if err := b.EnsureImage(ctx); err != nil {
		return err
	}
	_, err := b.crossing(ctx)
	return err
}
