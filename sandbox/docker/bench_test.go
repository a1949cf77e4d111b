package docker

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/local"
)

// Per-command overhead of running `true`, side by side with the docker
// CLI doing the same:
//
//	go test ./sandbox/docker -run '^$' -bench . -benchtime 20x
func BenchmarkOverhead(b *testing.B) {
	be, _ := newBackend(b, Config{})
	ctx := context.Background()
	dir := b.TempDir()
	spec := func(root string) *sandbox.Spec {
		return &sandbox.Spec{Command: []string{"true"}, Session: newSession(b, root), Workspace: dir}
	}
	if _, err := exec.LookPath("docker"); err != nil {
		b.Log("docker CLI not found: CLI rows skipped")
	}
	b.Run("backend-run", func(b *testing.B) {
		s := spec(dir + "/s1")
		for b.Loop() {
			if r, err := be.Run(ctx, s); err != nil || r.ExitCode != 0 {
				b.Fatal(err, r)
			}
		}
	})
	b.Run("cli-run-rm", func(b *testing.B) {
		cliBench(b, "run", "--rm", "--network", "none", TestImage, "true")
	})
	root := b.TempDir()
	os.Chmod(root, 0o755)
	sb, err := be.Start(ctx, StartOptions{Name: "bench-" + randToken(), SessionsRoot: root})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Stop(context.Background(), sb.SandboxName())
	b.Run("persistent-exec", func(b *testing.B) {
		s := spec(root + "/s2")
		s.Workspace = ""
		for b.Loop() {
			if r, err := sb.Run(ctx, s); err != nil || r.ExitCode != 0 {
				b.Fatal(err, r)
			}
		}
	})
	b.Run("cli-exec", func(b *testing.B) {
		cliBench(b, "exec", sb.ID(), "true")
	})
}

func cliBench(b *testing.B, args ...string) {
	if _, err := exec.LookPath("docker"); err != nil {
		b.Skip("no docker CLI")
	}
	for b.Loop() {
		if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
			b.Fatal(err, string(out))
		}
	}
}

// BenchmarkPersistentAgent compares, interleaved in the same loop (so
// machine noise hits all alike), `true` in a persistent sandbox through
// the agent, through the exec API, through the docker CLI's exec, and as
// a local process (the cost of a process start with the same plumbing):
//
//	go test ./sandbox/docker -run '^$' -bench PersistentAgent -benchtime 30x
func BenchmarkPersistentAgent(b *testing.B) {
	ctx := context.Background()
	start := func(cfg Config) (*Sandbox, string) {
		be, _ := newBackend(b, cfg)
		root := b.TempDir()
		os.Chmod(root, 0o755)
		sb, err := be.Start(ctx, StartOptions{Name: "bench-" + randToken(), SessionsRoot: root})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { be.Stop(context.Background(), sb.SandboxName()) })
		return sb, root
	}
	viaAgent, agentRoot := start(Config{Agent: agentBinary(b)})
	viaExec, execRoot := start(Config{})
	host := local.New()
	localRoot := b.TempDir()
	specs := map[string]*sandbox.Spec{
		"agent": {Command: []string{"true"}, Session: newSession(b, agentRoot+"/s")},
		"exec":  {Command: []string{"true"}, Session: newSession(b, execRoot+"/s")},
		"local": {Command: []string{"true"}, Session: newSession(b, localRoot+"/s"), Workspace: localRoot},
	}
	backends := map[string]sandbox.Backend{"agent": viaAgent, "exec": viaExec, "local": host}
	_, cliErr := exec.LookPath("docker")
	total := map[string]time.Duration{}
	for _, k := range []string{"agent", "exec", "local"} { // warm up
		if _, err := backends[k].Run(ctx, specs[k]); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		for _, k := range []string{"agent", "exec", "local"} {
			t0 := time.Now()
			r, err := backends[k].Run(ctx, specs[k])
			if err != nil || r.ExitCode != 0 {
				b.Fatal(k, err, r)
			}
			total[k] += time.Since(t0)
		}
		if cliErr == nil {
			t0 := time.Now()
			if out, err := exec.Command("docker", "exec", viaExec.ID(), "true").CombinedOutput(); err != nil {
				b.Fatal(err, string(out))
			}
			total["cli-exec"] += time.Since(t0)
		}
	}
	ms := func(k string) float64 { return float64(total[k].Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(ms("agent"), "agent-ms/op")
	b.ReportMetric(ms("exec"), "exec-api-ms/op")
	b.ReportMetric(ms("local"), "local-ms/op")
	b.ReportMetric(ms("agent")/ms("exec"), "agent/exec-api")
	b.ReportMetric(ms("agent")/ms("local"), "agent/local")
	if cliErr == nil {
		b.ReportMetric(ms("cli-exec"), "cli-exec-ms/op")
		b.ReportMetric(ms("agent")/ms("cli-exec"), "agent/cli-exec")
	}
}
