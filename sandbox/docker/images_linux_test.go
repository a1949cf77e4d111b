package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/gatebridge/gatebridge/sandbox"
)

// testRegistry is Debian's docker-registry on loopback, behind a proxy
// that records every request (dockerd allows plain HTTP to 127.0.0.0/8).
type testRegistry struct {
	Host string // 127.0.0.1:PORT of the proxy: the reference's registry
	mu   sync.Mutex
	reqs []string
	hang chan struct{} // set: manifest requests block until it is closed
}

func (r *testRegistry) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.reqs...)
}

func (r *testRegistry) saw(sub string) bool {
	for _, q := range r.requests() {
		if strings.Contains(q, sub) {
			return true
		}
	}
	return false
}

// startRegistry runs docker-registry with its storage in a temp dir,
// skipping (failing where GATEBRIDGE_REQUIRE_BACKENDS names docker) when
// it is not installed. The process, its dir and the proxy go at cleanup.
func startRegistry(t *testing.T) *testRegistry {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		if required("docker") {
			t.Fatalf("docker-registry (Debian package docker-registry) required to test pulls: %v", err)
		}
		t.Skipf("docker-registry not installed (apt-get install docker-registry): %v", err)
	}
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	conf := fmt.Sprintf("version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %s\n",
		filepath.Join(dir, "data"), addr)
	confPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd := exec.Command(bin, "serve", confPath)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	up := false
	for range 200 { // until it answers (at most 20 s)
		if resp, err := http.Get("http://" + addr + "/v2/"); err == nil {
			resp.Body.Close()
			up = resp.StatusCode == http.StatusOK
			if up {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !up {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("docker-registry did not answer on %s: %s", addr, logs.String())
	}
	reg := &testRegistry{}
	target, _ := url.Parse("http://" + addr)
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		reg.mu.Lock()
		reg.reqs = append(reg.reqs, q.Method+" "+q.URL.Path)
		hang := reg.hang
		reg.mu.Unlock()
		if hang != nil && strings.Contains(q.URL.Path, "/manifests/") {
			select {
			case <-hang:
			case <-q.Context().Done():
			}
			return
		}
		proxy.ServeHTTP(w, q)
	}))
	t.Cleanup(srv.Close)
	reg.Host = srv.Listener.Addr().String()
	return reg
}

// pushTestImage pushes the test image to reg as name:tag and removes the
// tag locally again, so that a sandbox of that reference must pull it.
func pushTestImage(t *testing.T, cli client.APIClient, reg *testRegistry, name, tag string) string {
	t.Helper()
	ctx := context.Background()
	ref := reg.Host + "/" + name + ":" + tag
	if _, err := cli.ImageTag(ctx, client.ImageTagOptions{Source: TestImage, Target: ref}); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.ImagePush(ctx, ref, client.ImagePushOptions{RegistryAuth: "e30="}) // base64("{}"): no credentials
	if err != nil {
		t.Fatal(err)
	}
	for msg, err := range resp.JSONMessages(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if msg.Error != nil {
			t.Fatalf("push %s: %s", ref, msg.Error.Message)
		}
	}
	removeImage(t, cli, ref)
	t.Cleanup(func() { removeImage(t, cli, ref) })
	return ref
}

// removeImage removes the tag ref (the test image itself stays).
func removeImage(t *testing.T, cli client.APIClient, ref string) {
	t.Helper()
	_, _ = cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{})
	if _, err := cli.ImageInspect(context.Background(), ref); err == nil {
		t.Fatalf("image %s still present after removal", ref)
	}
}

func present(cli client.APIClient, ref string) bool {
	_, err := cli.ImageInspect(context.Background(), ref)
	return err == nil
}

// TestPullMissingImage: a sandbox of an image that is not present pulls
// it from its registry, both where per-command sandboxes are readied
// (Check: run --sandbox docker, serve's Prepare) and where persistent
// ones start (Start: sandbox start, serve's sandbox/open, the pool), and
// the command runs in it.
func TestPullMissingImage(t *testing.T) {
	cli := engine(t)
	reg := startRegistry(t)
	ref := pushTestImage(t, cli, reg, "gatebridge-pull", "v1")
	var progress bytes.Buffer
	b, _ := newBackend(t, Config{Image: ref, PullProgress: &progress})
	defer b.Close()

	if err := b.Check(context.Background()); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if !present(cli, ref) || !reg.saw("/v2/gatebridge-pull/manifests/v1") {
		t.Fatalf("Check did not pull %s (registry saw %v)", ref, reg.requests())
	}
	if !strings.Contains(progress.String(), "pulling") {
		t.Errorf("no progress: %q", progress.String())
	}
	if r := run(t, b, context.Background(), "echo pulled"); out(r) != "pulled" {
		t.Errorf("run: %q", out(r))
	}

	removeImage(t, cli, ref)
	sb := startSandbox(t, b, "", false)
	if !present(cli, ref) {
		t.Fatalf("Start did not pull %s", ref)
	}
	if r, err := runIn(t, sb, context.Background(), "echo persistent"); err != nil || strings.TrimSpace(string(r.Stdout)) != "persistent" {
		t.Errorf("run in the pulled sandbox: %v %+v", err, r)
	}
}

// TestPullFailure: a tag the registry does not have, and a registry that
// is down, are both a failed pull (sandbox.ErrImagePull, with a hint),
// not a missing image nor an unreachable engine, on both paths.
func TestPullFailure(t *testing.T) {
	cli := engine(t)
	reg := startRegistry(t)
	pushTestImage(t, cli, reg, "gatebridge-pull", "v1")
	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downHost := down.Addr().String()
	down.Close() // nothing listens there now
	for _, ref := range []string{reg.Host + "/gatebridge-pull:no-such-tag", downHost + "/gatebridge-pull:v1"} {
		b, _ := newBackend(t, Config{Image: ref, PullProgress: io.Discard})
		checkErr := b.Check(context.Background())
		_, startErr := b.Start(context.Background(), StartOptions{Name: fmt.Sprintf("test-pullfail-%d", time.Now().UnixNano()%1e9), SessionsRoot: t.TempDir()})
		for path, err := range map[string]error{"Check": checkErr, "Start": startErr} {
			var se *sandbox.Error
			if !errors.Is(err, sandbox.ErrImagePull) || errors.Is(err, sandbox.ErrImageMissing) || !errors.As(err, &se) || se.Hint() == "" {
				t.Errorf("%s %s: %v; want ErrImagePull with a hint", path, ref, err)
			}
		}
		b.Close()
		if present(cli, ref) {
			t.Errorf("%s present", ref)
		}
	}
	if !reg.saw("/manifests/no-such-tag") {
		t.Errorf("the registry was not asked for the missing tag: %v", reg.requests())
	}
}

// TestPullTimeout: sandbox.docker.pull_timeout bounds a pull from a
// registry that never answers.
func TestPullTimeout(t *testing.T) {
	cli := engine(t)
	reg := startRegistry(t)
	ref := pushTestImage(t, cli, reg, "gatebridge-pull", "v1")
	reg.mu.Lock()
	reg.hang = make(chan struct{})
	reg.mu.Unlock()
	defer close(reg.hang)
	b, _ := newBackend(t, Config{Image: ref, PullProgress: io.Discard, PullTimeout: time.Second})
	defer b.Close()
	err := b.Check(context.Background())
	if !errors.Is(err, sandbox.ErrImagePull) || !strings.Contains(err.Error(), "sandbox.docker.pull_timeout") {
		t.Errorf("Check: %v; want a pull timed out by sandbox.docker.pull_timeout", err)
	}
}

// TestPullNever: with sandbox.docker.pull never a missing image is
// missing (ErrImageMissing), and no registry is asked.
func TestPullNever(t *testing.T) {
	cli := engine(t)
	reg := startRegistry(t)
	ref := pushTestImage(t, cli, reg, "gatebridge-pull", "v1")
	n := len(reg.requests())
	b, _ := newBackend(t, Config{Image: ref, Pull: PullNever, PullProgress: io.Discard})
	defer b.Close()
	checkErr := b.Check(context.Background())
	_, startErr := b.Start(context.Background(), StartOptions{Name: fmt.Sprintf("test-pullnever-%d", time.Now().UnixNano()%1e9), SessionsRoot: t.TempDir()})
	for path, err := range map[string]error{"Check": checkErr, "Start": startErr} {
		if !errors.Is(err, sandbox.ErrImageMissing) || errors.Is(err, sandbox.ErrImagePull) {
			t.Errorf("%s: %v; want ErrImageMissing", path, err)
		}
	}
	if got := reg.requests(); len(got) != n || present(cli, ref) {
		t.Errorf("pulled anyway: %v", got[n:])
	}
}

// TestRefusedImageNeverPulled: an image outside sandbox.docker.images,
// asked for as serve's sandbox/open does (Settings.Image), is refused
// before anything reaches the registry, even when it is in a registry
// that has it; the same reference allowed is pulled.
func TestRefusedImageNeverPulled(t *testing.T) {
	cli := engine(t)
	reg := startRegistry(t)
	ref := pushTestImage(t, cli, reg, "gatebridge-pull", "v1")
	n := len(reg.requests())
	e := Entry()
	for _, list := range [][]string{
		{"gatebridge-pull:*"},                   // docker.io's, not this registry's
		{reg.Host + "/gatebridge-pull:v2"},      // another tag
		{reg.Host + "/gatebridge-pull-other:*"}, // another repository
		{"127.0.0.2" + strings.TrimPrefix(reg.Host, "127.0.0.1") + "/gatebridge-pull:*"}, // another host
	} {
		cfg := Config{Client: cli, Images: list, PullProgress: io.Discard}
		b, err := e.New(sandbox.Settings{Image: ref, Extra: map[string]any{Name: cfg}})
		if err == nil {
			b.(*Backend).Check(context.Background())
			b.(*Backend).Close()
		}
		if !errors.Is(err, sandbox.ErrImageRefused) || !strings.Contains(err.Error(), ImagesKey) {
			t.Errorf("images %v: %v; want refused naming %s", list, err, ImagesKey)
		}
	}
	if got := reg.requests(); len(got) != n || present(cli, ref) {
		t.Fatalf("a refused image reached the registry: %v", got[n:])
	}
}

// TestOpenPullsLikeServe: the steps serve's sandbox/open takes for an
// explicit "docker" with an allowed image that is not present (New,
// Usable, Prepare, StartSandbox) pull it and run; auto, asked the same,
// does not pick docker and asks no registry.
func TestOpenPullsLikeServe(t *testing.T) {
	cli := engine(t)
	reg := startRegistry(t)
	ref := pushTestImage(t, cli, reg, "gatebridge-pull", "v1")
	cfg := Config{Client: cli, Images: []string{reg.Host + "/gatebridge-pull:*"}, PullProgress: io.Discard}
	s := sandbox.Settings{Image: ref, Extra: map[string]any{Name: cfg}}
	reg2 := sandbox.NewRegistry()
	if err := Register(reg2); err != nil {
		t.Fatal(err)
	}
	n := len(reg.requests())
	if b, _, why, err := reg2.Auto(context.Background(), s, false); err == nil {
		sandbox.Close(b)
		t.Errorf("auto picked docker with the image missing: %s", why)
	}
	if got := reg.requests(); len(got) != n || present(cli, ref) {
		t.Errorf("auto asked the registry: %v", got[n:])
	}

	e := Entry()
	b, err := e.New(s)
	if err != nil {
		t.Fatal(err)
	}
	defer sandbox.Close(b)
	if err := e.Usable(context.Background(), b); err != nil {
		t.Fatalf("Usable: %v", err)
	}
	if err := e.Prepare(context.Background(), b); err != nil || !present(cli, ref) {
		t.Fatalf("Prepare did not pull: %v", err)
	}
	removeImage(t, cli, ref) // StartSandbox pulls too (the pool starts there)
	p, err := b.(sandbox.Starter).StartSandbox(context.Background(), sandbox.StartSpec{
		Name: fmt.Sprintf("test-openpull-%d", time.Now().UnixNano()%1e9), SessionsRoot: t.TempDir(), Owned: true})
	if err != nil {
		t.Fatalf("StartSandbox: %v", err)
	}
	defer p.Stop(context.Background())
	if !present(cli, ref) {
		t.Errorf("StartSandbox did not pull %s", ref)
	}
}
