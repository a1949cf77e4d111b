package docker

import (
	"context"
	"errors"
	"testing"

	"github.com/moby/moby/api/types/system"
	"github.com/moby/moby/client"
)

// factsEngine is a Podman whose GET /version fails until versionOK (as it
// did when /info, slow under load, used up a budget the two requests
// shared); every other request the test makes is not implemented.
type factsEngine struct {
	client.APIClient
	versionOK bool
	versions  int
}

func (e *factsEngine) ServerVersion(ctx context.Context, _ client.ServerVersionOptions) (client.ServerVersionResult, error) {
	e.versions++
	if !e.versionOK {
		return client.ServerVersionResult{}, context.DeadlineExceeded
	}
	return client.ServerVersionResult{Version: "4.3.1",
		Components: []system.ComponentVersion{{Name: "Podman Engine", Version: "4.3.1"}}}, nil
}

func (e *factsEngine) Info(ctx context.Context, _ client.InfoOptions) (client.SystemInfoResult, error) {
	return client.SystemInfoResult{Info: system.Info{ServerVersion: "4.3.1", DefaultRuntime: "runc"}}, nil
}

func (e *factsEngine) DaemonHost() string { return "unix:///nonexistent/podman.sock" }

// TestHostConfigUnknownEngine: when the engine does not say what it is,
// a container is not configured as if it were dockerd. Under Podman that
// guess dropped podmanUlimits, and every container of the backend failed
// to start (attach: "received 409", rlimit operation not permitted).
// The failed answer is not kept: once /version answers, Podman gets its
// rlimits.
func TestHostConfigUnknownEngine(t *testing.T) {
	e := &factsEngine{}
	b, err := New(Config{Client: e})
	if err != nil {
		t.Fatal(err)
	}
	hc, err := b.hostConfig(context.Background(), nil)
	if err == nil {
		t.Fatalf("hostConfig without an answer from /version: no error, ulimits %v", hc.Ulimits)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error does not carry the engine's: %v", err)
	}
	e.versionOK = true
	hc, err = b.hostConfig(context.Background(), nil)
	if err != nil {
		t.Fatalf("hostConfig once /version answers: %v", err)
	}
	if len(hc.Ulimits) == 0 {
		t.Errorf("Podman container without rlimits (asked /version %d times)", e.versions)
	}
	hc, err = b.hostConfig(context.Background(), nil)
	if err != nil || len(hc.Ulimits) == 0 || e.versions != 2 {
		t.Errorf("a known engine is asked again: err %v, ulimits %v, /version asked %d times", err, hc, e.versions)
	}
}
