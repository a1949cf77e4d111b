package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

// ownedIDs are the full ids of the protocol-owned containers with
// workspace ws.
func ownedIDs(t *testing.T, ws string) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-aq", "--no-trunc", "--filter", "label=io.gatebridge.owned=true", "--filter", "label=io.gatebridge.workspace="+ws).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return strings.Fields(string(out))
}

// created is when the engine created container id.
func created(t *testing.T, id string) time.Time {
	t.Helper()
	out, err := exec.Command("docker", "inspect", "-f", "{{.Created}}", id).Output()
	if err != nil {
		t.Fatalf("docker inspect %s: %v", id, err)
	}
	at, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// waitOwned waits until ws has n owned containers and returns their ids.
func waitOwned(t *testing.T, ws string, n int, what string) []string {
	t.Helper()
	var ids []string
	if !sandboxtest.Poll(2*time.Minute, func() bool { ids = ownedIDs(t, ws); return len(ids) == n }) {
		t.Fatalf("%s: %d owned containers, want %d", what, len(ids), n)
	}
	return ids
}

// hostnameIn is the container (its id's first 12 characters: its
// hostname) sandbox sb's commands run in.
func hostnameIn(s *serveConn, sb, pid string) string {
	o := s.Run(sb, pid, nil, "hostname")
	if o.Exited.ExitCode != 0 {
		s.t.Fatalf("hostname: %+v %s", o.Exited, o.Stderr)
	}
	return strings.TrimSpace(string(o.Stdout))
}

// serve --pool 2 with docker: after a spec was opened once, two
// containers wait; sandbox/open takes one created before the open, a
// replacement refills the pool, a container a client had is removed at
// its close and never handed out again, and SIGTERM to serve removes
// every pooled container.
func TestServePool(t *testing.T) {
	needBackend(t, "docker")
	s := startServe(t, nil, "--pool", "2")
	ws := workspace(t)
	s.Call(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "seed", Backend: "docker", Workspace: ws}, nil)
	s.Call(rpc.MethodSandboxClose, rpc.SandboxCloseParams{SandboxID: "seed"}, nil)
	pooled := waitOwned(t, ws, 2, "the pool after the first open")

	before := time.Now()
	s.Call(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "tenant", Backend: "docker", Workspace: ws}, nil)
	host := hostnameIn(s, "tenant", "p1")
	var taken string
	for _, id := range pooled {
		if strings.HasPrefix(id, host) {
			taken = id
		}
	}
	if taken == "" {
		t.Fatalf("sandbox/open ran in container %s, not one of the pool's %q", host, pooled)
	}
	if at := created(t, taken); !at.Before(before) {
		t.Fatalf("container %s created at %s, after sandbox/open began (%s): not pre-started", host, at, before)
	}
	// The replacement: two pooled again, besides the taken one.
	waitOwned(t, ws, 3, "the refill")
	s.Call(rpc.MethodSandboxClose, rpc.SandboxCloseParams{SandboxID: "tenant"}, nil)
	for _, id := range waitOwned(t, ws, 2, "after the tenant closed") {
		if id == taken {
			t.Fatalf("container %s is back in the pool after its client closed it", host)
		}
	}
	for i, sb := range []string{"next1", "next2", "next3"} {
		s.Call(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: sb, Backend: "docker", Workspace: ws}, nil)
		if h := hostnameIn(s, sb, "p-"+sb); h == host {
			t.Fatalf("open %d ran in container %s, which a client had before", i, h)
		}
		s.Call(rpc.MethodSandboxClose, rpc.SandboxCloseParams{SandboxID: sb}, nil)
	}
	waitOwned(t, ws, 2, "the pool before SIGTERM")
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("serve still runs a minute after SIGTERM")
	}
	if ids := ownedIDs(t, ws); len(ids) != 0 {
		t.Fatalf("serve exited on SIGTERM leaving pooled containers %q", ids)
	}
}

// A server with a pool killed with SIGKILL leaves its pooled containers
// labelled as its own; `gatebridge prune` removes them.
func TestServePoolCrashPrune(t *testing.T) {
	needBackend(t, "docker")
	s := startServe(t, nil, "--pool", "2")
	ws := workspace(t)
	s.Call(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "seed", Backend: "docker", Workspace: ws}, nil)
	s.Call(rpc.MethodSandboxClose, rpc.SandboxCloseParams{SandboxID: "seed"}, nil)
	waitOwned(t, ws, 2, "the pool")
	s.cmd.Process.Kill()
	s.cmd.Wait()
	if n := len(ownedIDs(t, ws)); n != 2 {
		t.Fatalf("%d pooled containers after SIGKILL, want the 2 left behind: nothing to test", n)
	}
	if o := gbRaw(t, workspace(t), nil, nil, 2*time.Minute, "prune"); o.Code != 0 {
		t.Fatalf("prune: exit %d: %s", o.Code, o.Stderr)
	}
	if ids := ownedIDs(t, ws); len(ids) != 0 {
		t.Fatalf("prune left the dead server's pooled containers %q", ids)
	}
}

// The image allowlist holds with a pool: an image outside
// sandbox.docker.images is refused at every open, and nothing is pooled
// for it (pooled starts go through the same image check); the allowed
// default is pooled.
func TestServePoolImagePolicy(t *testing.T) {
	needBackend(t, "docker")
	conf := filepath.Join(t.TempDir(), "gatebridge.yaml")
	if err := os.WriteFile(conf, []byte("sandbox:\n  docker:\n    images: [\"busybox:1.36\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, nil, "--config", conf, "--pool", "2")
	bad, good := workspace(t), workspace(t)
	for _, id := range []string{"bad1", "bad2"} {
		e := s.CallErr(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: id, Backend: "docker", Image: "busybox:latest", Workspace: bad})
		if e == nil || !strings.Contains(e.Message, "sandbox.docker.images") {
			t.Fatalf("busybox:latest with a pool: %+v; want refused naming sandbox.docker.images", e)
		}
	}
	s.Call(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "ok", Backend: "docker", Workspace: good}, nil)
	waitOwned(t, good, 3, "the default image's pool")
	if ids := ownedIDs(t, bad); len(ids) != 0 {
		t.Fatalf("containers %q were started for a refused image", ids)
	}
}
