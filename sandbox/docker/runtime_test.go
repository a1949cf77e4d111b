package docker

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/moby/moby/client"
)

// TestRuntimesReport: every runtime the engine lists is measured; runc
// (the host's kernel) carries every crossing, and runsc, where present,
// is gVisor's kernel, where a FIFO does not cross and ACLs are ignored.
func TestRuntimesReport(t *testing.T) {
	b, _ := newBackend(t, Config{})
	rs, err := b.Runtimes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]RuntimeReport{}
	for _, r := range rs {
		j, _ := json.Marshal(r)
		t.Logf("%s", j)
		seen[r.Name] = r
	}
	if r, ok := seen["runc"]; ok && (r.Err != "" || !r.FIFO || !r.Events || !r.ACL || !r.Poll || r.GVisor) {
		t.Errorf("runc: %+v", r)
	}
	if r, ok := seen["runsc"]; ok {
		if r.Err != "" || !r.GVisor || r.FIFO || r.ACL || !r.Poll || r.Usable() != "" || r.HostTasks != gVisorHostTasks {
			t.Errorf("runsc: %+v", r)
		}
	} else if required("docker-runsc") {
		t.Errorf("no runsc among %v", rs)
	}
}

// TestRootlessPodmanRefusesLimits: rootless Podman on a cgroup v1 host
// accepts a memory limit and runs the container without it (its memory
// cgroup says unlimited). gatebridge refuses to run with limits there
// instead of running without them. It needs a rootless Podman service:
// GATEBRIDGE_PODMAN_ROOTLESS_HOST (see docs/docker.md); not set in CI.
func TestRootlessPodmanRefusesLimits(t *testing.T) {
	host := os.Getenv("GATEBRIDGE_PODMAN_ROOTLESS_HOST")
	if host == "" {
		t.Skip("GATEBRIDGE_PODMAN_ROOTLESS_HOST not set (a rootless podman system service)")
	}
	cli, err := client.New(client.WithHost(host))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := newBackend(t, Config{Client: cli, Memory: 64 << 20})
	f := b.facts(context.Background())
	if !f.podman || !f.rootless {
		t.Fatalf("%s: podman %v rootless %v: not a rootless Podman", host, f.podman, f.rootless)
	}
	if !f.cgroupsV1 {
		t.Skip("cgroup v2: rootless Podman can set limits here")
	}
	if err := b.Check(context.Background()); !errors.Is(err, ErrLimitsUnenforced) {
		t.Errorf("Check: %v, want ErrLimitsUnenforced", err)
	}
	_, err = runErr(t, b, context.Background(), "cat /sys/fs/cgroup/memory/memory.limit_in_bytes")
	if !errors.Is(err, ErrLimitsUnenforced) {
		t.Errorf("Run with a 64 MiB limit: %v, want ErrLimitsUnenforced (it would run unlimited)", err)
	}
	b0, _ := newBackend(t, Config{Client: cli, Memory: -1, NanoCPUs: -1, PidsLimit: -1})
	if err := b0.checkLimits(context.Background(), b0.cfg.Memory, b0.cfg.NanoCPUs, b0.cfg.PidsLimit); err != nil {
		t.Errorf("no limits asked: %v", err)
	}
}
