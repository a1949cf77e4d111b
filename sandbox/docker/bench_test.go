package docker

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/gatebridge/gatebridge/sandbox"
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
