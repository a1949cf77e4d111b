package docker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// engine returns a client for tests, skipping (or failing when
// GATEBRIDGE_REQUIRE_BACKENDS names docker) when the engine is unreachable,
// and builds the test image when it is missing.
func engine(t testing.TB) client.APIClient {
	t.Helper()
	engineOnce.Do(func() {
		cli, err := client.New(client.FromEnv)
		if err != nil {
			engineErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
			engineErr = err
			return
		}
		bctx, bcancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer bcancel()
		if _, err := BuildTestImage(bctx, cli, TestImageOptions{}); err != nil {
			engineErr = err
			return
		}
		engineCli = cli
	})
	if engineErr != nil {
		if strings.Contains(os.Getenv("GATEBRIDGE_REQUIRE_BACKENDS"), "docker") {
			t.Fatalf("docker backend required but unusable: %v", engineErr)
		}
		t.Skipf("docker engine unusable: %v", engineErr)
	}
	return engineCli
}

var (
	engineOnce sync.Once
	engineCli  client.APIClient
	engineErr  error
)

// newBackend returns a backend with a unique label so tests can count
// their containers.
func newBackend(t testing.TB, cfg Config) (*Backend, string) {
	t.Helper()
	if cfg.Client == nil {
		cfg.Client = engine(t)
	}
	tag := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()) + "-" + time.Now().Format("150405.000000")
	cfg.Labels = map[string]string{"io.gatebridge.test": tag}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b, tag
}

// containersWith lists all containers labelled io.gatebridge.test=tag.
func containersWith(t testing.TB, cli client.APIClient, tag string) []string {
	t.Helper()
	f := client.Filters{}
	f.Add("label", "io.gatebridge.test="+tag)
	res, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range res.Items {
		ids = append(ids, c.ID)
	}
	return ids
}

// newSession makes a session layout under dir like bridge does.
func newSession(t testing.TB, dir string) sandbox.SessionDirs {
	t.Helper()
	s := sandbox.SessionDirs{
		Root:      dir,
		Bin:       filepath.Join(dir, "bin"),
		Calls:     filepath.Join(dir, "calls"),
		Responses: filepath.Join(dir, "responses"),
		Tmp:       filepath.Join(dir, "tmp"),
	}
	for _, d := range []string{s.Root, s.Bin, s.Calls, s.Responses, s.Tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

type runOpt func(*sandbox.Spec)

func run(t testing.TB, b sandbox.Backend, ctx context.Context, script string, opts ...runOpt) *sandbox.Result {
	t.Helper()
	res, err := runErr(t, b, ctx, script, opts...)
	if err != nil {
		t.Fatalf("run %q: %v", script, err)
	}
	return res
}

func runErr(t testing.TB, b sandbox.Backend, ctx context.Context, script string, opts ...runOpt) (*sandbox.Result, error) {
	t.Helper()
	dir := t.TempDir()
	spec := &sandbox.Spec{
		Command:    []string{"sh", "-c", script},
		Session:    newSession(t, filepath.Join(dir, "session")),
		SessionEnv: sandboxtest.SessionEnv,
		Workspace:  filepath.Join(dir, "ws"),
		KillGrace:  500 * time.Millisecond,
	}
	if err := os.MkdirAll(spec.Workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, o := range opts {
		o(spec)
	}
	return b.Run(ctx, spec)
}

func withStdin(s string) runOpt { return func(sp *sandbox.Spec) { sp.Stdin = strings.NewReader(s) } }
func withEnv(kv ...string) runOpt {
	return func(sp *sandbox.Spec) { sp.Env = append(sp.Env, kv...) }
}
func withSpec(f func(*sandbox.Spec)) runOpt { return f }

func out(r *sandbox.Result) string { return string(bytes.TrimSpace(r.Stdout)) }

func containerKillOpts(sig string) client.ContainerKillOptions {
	return client.ContainerKillOptions{Signal: sig}
}

// createOrphan creates a per-command container whose owner pid is dead.
func createOrphan(t *testing.T, b *Backend, tag string) string {
	t.Helper()
	l := b.labels(nil, map[string]string{"io.gatebridge.test": tag})
	l[LabelPID] = "999999999"
	res, err := b.cli.ContainerCreate(context.Background(), client.ContainerCreateOptions{
		Config:     &container.Config{Image: b.cfg.Image, Cmd: []string{"true"}, Labels: l},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.remove(context.Background(), res.ID) })
	in, err := b.cli.ContainerInspect(context.Background(), res.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(in.Container.Name, "/")
}

func waitExited(t *testing.T, b *Backend, id string) {
	t.Helper()
	for range 100 {
		r, err := b.cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
		if err != nil || !r.Container.State.Running {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s still running", id)
}

// required reports whether GATEBRIDGE_REQUIRE_BACKENDS names token.
func required(token string) bool {
	return slices.Contains(strings.Split(os.Getenv("GATEBRIDGE_REQUIRE_BACKENDS"), ","), token)
}

// needRuntime skips unless the engine has the OCI runtime name (fails
// instead where GATEBRIDGE_REQUIRE_BACKENDS names docker-NAME).
func needRuntime(t testing.TB, cli client.APIClient, name string) {
	t.Helper()
	res, err := cli.Info(context.Background(), client.InfoOptions{})
	if err == nil {
		if _, ok := res.Info.Runtimes[name]; ok {
			return
		}
		err = fmt.Errorf("the engine has no OCI runtime %s (register it: .ci/docker-runtime %s PATH)", name, name)
	}
	if required("docker-" + name) {
		t.Fatalf("docker-%s required by GATEBRIDGE_REQUIRE_BACKENDS but unusable: %v", name, err)
	}
	t.Skipf("docker-%s unusable: %v", name, err)
}

// podmanHost is where the tests find Podman's Docker-compatible API:
// GATEBRIDGE_PODMAN_HOST (.ci/run starts one with .ci/podman-service),
// else the socket of the podman.socket unit.
func podmanHost() string {
	if h := os.Getenv("GATEBRIDGE_PODMAN_HOST"); h != "" {
		return h
	}
	return "unix:///run/podman/podman.sock"
}

// podman returns a client of Podman's Docker-compatible API with the test
// image loaded, skipping (or failing where GATEBRIDGE_REQUIRE_BACKENDS
// names podman) when it does not answer.
func podman(t testing.TB) client.APIClient {
	t.Helper()
	podmanOnce.Do(func() {
		cli, err := client.New(client.WithHost(podmanHost()))
		if err != nil {
			podmanErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
			podmanErr = fmt.Errorf("%s: %w (start one: .ci/podman-service DIR)", podmanHost(), err)
			return
		}
		if _, err := BuildTestImage(ctx, cli, TestImageOptions{}); err != nil {
			podmanErr = err
			return
		}
		podmanCli = cli
	})
	if podmanErr != nil {
		if required("podman") {
			t.Fatalf("podman required by GATEBRIDGE_REQUIRE_BACKENDS but unusable: %v", podmanErr)
		}
		t.Skipf("podman unusable: %v", podmanErr)
	}
	return podmanCli
}

var (
	podmanOnce sync.Once
	podmanCli  client.APIClient
	podmanErr  error
)
