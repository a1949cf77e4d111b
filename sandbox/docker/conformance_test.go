package docker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

// tags maps a subtest name to the label of its backend's containers.
var tags sync.Map

// noLeftovers checks the host for processes with marker (the local engine
// runs container processes on this host) and that no container of the
// subtest's backend remains.
func noLeftovers(t *testing.T, marker string) {
	sandboxtest.HostNoLeftovers(t, marker)
	tag, ok := tags.Load(t.Name())
	if !ok {
		t.Fatalf("no backend for %s", t.Name())
	}
	if ids := containersWith(t, engine(t), tag.(string)); len(ids) != 0 {
		t.Errorf("containers left after Run returned: %v", ids)
	}
}

func TestConformance(t *testing.T) {
	engine(t)
	sandboxtest.Run(t, func(t *testing.T) sandbox.Backend {
		b, tag := newBackend(t, Config{})
		tags.Store(t.Name(), tag)
		return b
	}, sandboxtest.Options{Isolated: true, NoLeftovers: noLeftovers})
}

// TestConformancePersistent runs the suite against exec mode. The suite's
// fixtures live under os.TempDir, so that (a directory of this test's own)
// is the sandbox's sessions root and (writable) workspace. The isolation checks are off: a writable
// workspace and shared sessions root are exactly the documented weaker
// isolation; TestPersistent checks the bin/ and responses/ mitigation.
func TestConformancePersistent(t *testing.T) {
	persistentConformance(t, Config{})
}

// TestConformancePersistentAgent runs the suite against a persistent
// sandbox whose commands go through `gatebridge agent`.
func TestConformancePersistentAgent(t *testing.T) {
	engine(t)
	persistentConformance(t, Config{Agent: agentBinary(t)})
}

// TestConformancePersistentAgentPID1: the same with no init in front
// (sandbox.docker.no_init): the agent is PID 1 and reaps every orphan
// itself, handing its commands' statuses to their waiters.
func TestConformancePersistentAgentPID1(t *testing.T) {
	engine(t)
	persistentConformance(t, Config{Agent: agentBinary(t), NoInit: true})
}

// TestConformancePersistentShAgent: the same through the sh agent, run
// by the image's busybox sh.
func TestConformancePersistentShAgent(t *testing.T) {
	engine(t)
	persistentConformance(t, Config{Agent: AgentSh})
}

func persistentConformance(t *testing.T, cfg Config) {
	sb := startPersistent(t, cfg)
	sandboxtest.Run(t, func(t *testing.T) sandbox.Backend { return sb }, sandboxtest.Options{Isolated: false})
}

// TestTTYPersistentAgent runs the terminal suite through the Go agent,
// which opens the terminal inside the sandbox.
func TestTTYPersistentAgent(t *testing.T) {
	engine(t)
	sb := startPersistent(t, Config{Agent: agentBinary(t)})
	sandboxtest.RunTTY(t, func(t *testing.T) sandbox.Backend { return sb }, sandboxtest.Options{})
	t.Run("Arg0", func(t *testing.T) {
		f := sandboxtest.NewFixture(t, sandboxtest.Options{})
		spec := f.Spec(`tr '\0' ' ' < /proc/$$/cmdline; echo`)
		spec.Arg0 = "-sh" // busybox picks its applet by argv[0]: a login shell
		res, err := sb.Run(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(res.Stdout), "-sh -c ") {
			t.Errorf("cmdline %q (exit %d, stderr %q)", res.Stdout, res.ExitCode, res.Stderr)
		}
	})
}

// The sh agent and docker exec cannot open a terminal: they say so,
// naming docker, and run nothing.
func TestTTYPersistentRefused(t *testing.T) {
	engine(t)
	for _, cfg := range []Config{{Agent: AgentSh}, {}} {
		sb := startPersistent(t, cfg)
		f := sandboxtest.NewFixture(t, sandboxtest.Options{})
		sandboxtest.RunTTYRefused(t, sb, f)
		if err := sandbox.Arg0Support(sb); err == nil {
			t.Errorf("agent %q: Arg0Support = nil", cfg.Agent)
		}
	}
}

func startPersistent(t *testing.T, cfg Config) *Sandbox {
	b, _ := newBackend(t, cfg)
	// The suite's fixtures live under os.TempDir: point it at a directory
	// of this test's own, so the sessions root does not overlap another
	// sandbox's (Start refuses that) when packages test in parallel.
	root := t.TempDir()
	for _, d := range []string{root, filepath.Dir(root)} {
		os.Chmod(d, 0o755)
	}
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	t.Setenv("TMPDIR", root)
	name := "conformance-" + strings.ReplaceAll(filepath.Base(t.TempDir()), "_", "-")
	sb, err := b.Start(context.Background(), StartOptions{Name: name, SessionsRoot: root, Workspace: root, WorkspaceWritable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background(), name) })
	return sb
}

// TestConformanceRunsc runs the suite under gVisor (OCI runtime runsc):
// wrappers poll (a FIFO does not cross), sessions are handed over by
// ownership (gVisor ignores ACLs). It skips where the engine has no
// runsc, and fails where GATEBRIDGE_REQUIRE_BACKENDS names docker-runsc.
func TestConformanceRunsc(t *testing.T) {
	needRuntime(t, engine(t), "runsc")
	sandboxtest.Run(t, func(t *testing.T) sandbox.Backend {
		b, tag := newBackend(t, Config{Runtime: "runsc"})
		tags.Store(t.Name(), tag)
		return b
	}, sandboxtest.Options{Isolated: true, NoLeftovers: noLeftovers})
}

// TestConformancePersistentRunsc: a persistent sandbox under gVisor;
// FIFOs do not cross, so commands go through the exec API, not the agent.
func TestConformancePersistentRunsc(t *testing.T) {
	needRuntime(t, engine(t), "runsc")
	persistentConformance(t, Config{Runtime: "runsc", Agent: agentBinary(t)})
}

// TestConformancePodman runs the suite against Podman's Docker-compatible
// API (rootful `podman system service`): the same backend, with the
// rlimits Podman needs (podmanUlimits).
func TestConformancePodman(t *testing.T) {
	cli := podman(t)
	sandboxtest.Run(t, func(t *testing.T) sandbox.Backend {
		b, tag := newBackend(t, Config{Client: cli})
		tags.Store(t.Name(), tag)
		return b
	}, sandboxtest.Options{Isolated: true, NoLeftovers: func(t *testing.T, marker string) {
		sandboxtest.HostNoLeftovers(t, marker)
		tag, _ := tags.Load(t.Name())
		if ids := containersWith(t, cli, tag.(string)); len(ids) != 0 {
			t.Errorf("containers left after Run returned: %v", ids)
		}
	}})
}

// TestConformancePersistentPodman: a persistent sandbox under Podman, its
// commands through the agent.
func TestConformancePersistentPodman(t *testing.T) {
	persistentConformance(t, Config{Client: podman(t), Agent: agentBinary(t)})
}

// TestTTY runs the terminal suite on a container of its own per command
// (docker's own terminal).
func TestTTY(t *testing.T) {
	engine(t)
	sandboxtest.RunTTY(t, func(t *testing.T) sandbox.Backend {
		b, tag := newBackend(t, Config{})
		tags.Store(t.Name(), tag)
		return b
	}, sandboxtest.Options{Isolated: true, NoLeftovers: noLeftovers})
}
