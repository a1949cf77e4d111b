// Package integration tests the built gatebridge binary end to end, on
// every sandbox backend this machine can run. A backend that cannot run
// here is skipped with the reason, unless GATEBRIDGE_REQUIRE_BACKENDS
// (comma list, set by CI) names it: then the test fails.
package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binary is the gatebridge binary built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gb-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "gatebridge")
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	build := exec.Command("go", "build", "-o", binary, "./cmd/gatebridge")
	// Static, as `make build` makes it: persistent docker sandboxes run it
	// as their agent in an image without libc.
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Dir = root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build gatebridge:", err)
		os.Exit(1)
	}
	os.Chmod(dir, 0o755) // non-root test users run the binary too
	// The MCP servers' tool-list cache of every gatebridge the tests run,
	// not the user's.
	cache, err := os.MkdirTemp("", "gatebridge-itest-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_CACHE_HOME", cache)
	code := m.Run()
	os.RemoveAll(dir)
	os.RemoveAll(cache)
	os.Exit(code)
}

// required reports whether CI requires backend name to run here.
func required(name string) bool {
	for _, b := range strings.Split(os.Getenv("GATEBRIDGE_REQUIRE_BACKENDS"), ",") {
		if strings.TrimSpace(b) == name {
			return true
		}
	}
	return false
}

var (
	probeMu  sync.Mutex
	probeErr = map[string]*error{}
)

// probe runs `gatebridge run --sandbox NAME -- true` once per backend
// (and per variant: docker-runsc, podman).
func probe(name string) error {
	probeMu.Lock()
	defer probeMu.Unlock()
	if e, ok := probeErr[name]; ok {
		return *e
	}
	var err error
	if name == "podman" {
		err = loadPodmanImage()
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		args, env := backendArgs(name)
		cmd := exec.CommandContext(ctx, binary, append(append([]string{"run"}, args...), "--", "true")...)
		cmd.Dir = os.TempDir()
		cmd.Env = append(os.Environ(), env...)
		out, rerr := cmd.CombinedOutput()
		cancel()
		if rerr != nil {
			err = fmt.Errorf("%v: %s", rerr, strings.TrimSpace(string(out)))
		}
	}
	probeErr[name] = &err
	return err
}

// needBackend skips (or fails, where required) when name cannot run here.
func needBackend(t testing.TB, name string) {
	t.Helper()
	if err := probe(name); err != nil {
		if required(name) {
			t.Fatalf("backend %s is required here (GATEBRIDGE_REQUIRE_BACKENDS) but cannot run: %v", name, err)
		}
		t.Skipf("backend %s cannot run here: %v", name, err)
	}
}

// Backend variants: the docker backend under gVisor (OCI runtime runsc),
// and against Podman's Docker-compatible API (GATEBRIDGE_PODMAN_HOST, as
// .ci/run starts it, else the podman.socket unit's socket). Only the
// hostile-mailbox tests run on them (forEachHostileBackend).
const (
	dockerRunsc = "docker-runsc"
	podmanName  = "podman"
)

func podmanHost() string {
	if h := os.Getenv("GATEBRIDGE_PODMAN_HOST"); h != "" {
		return h
	}
	return "unix:///run/podman/podman.sock"
}

// backendArgs are the run flags and extra env that select backend name.
func backendArgs(name string) (args, env []string) {
	switch name {
	case dockerRunsc:
		return []string{"--sandbox", "docker", "--runtime", "runsc"}, nil
	case podmanName:
		return []string{"--sandbox", "docker"}, []string{"DOCKER_HOST=" + podmanHost()}
	}
	return []string{"--sandbox", name}, nil
}

// isDocker: the backend is docker, under any engine or OCI runtime.
func isDocker(name string) bool { return name == "docker" || name == dockerRunsc || name == podmanName }

// loadPodmanImage puts the test image into Podman (make test-image does
// it for the docker engine).
func loadPodmanImage() error {
	_, file, _, _ := runtime.Caller(0)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", "./sandbox/docker/testimage")
	cmd.Dir = filepath.Dir(filepath.Dir(file))
	cmd.Env = append(os.Environ(), "DOCKER_HOST="+podmanHost())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("load the test image into podman at %s: %v: %s", podmanHost(), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// forEachHostileBackend is forEachBackend plus docker under gVisor and
// docker against Podman: the hostile-mailbox tests run on every engine
// and OCI runtime CI has.
func forEachHostileBackend(t *testing.T, fn func(t *testing.T, backend string)) {
	for _, b := range append(slices.Clone(backends), dockerRunsc, podmanName) {
		t.Run(b, func(t *testing.T) {
			needBackend(t, b)
			fn(t, b)
		})
	}
}

// backends are the sandboxes every scenario runs on.
var backends = []string{"local", "bwrap", "docker"}

// forEachBackend runs fn as a subtest per usable backend.
func forEachBackend(t *testing.T, fn func(t *testing.T, backend string)) {
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			needBackend(t, b)
			fn(t, b)
		})
	}
}

// Run is one gatebridge invocation.
type Run struct {
	Args    []string // after "run" flags, before "--"
	Command []string // after "--"
	Dir     string   // workspace and cwd; default a fresh temp dir
	Env     []string
	Stdin   []byte
	Config  string // YAML written to a temp gatebridge.yaml and passed with --config
	Timeout time.Duration
}

// Out is the outcome of a Run.
type Out struct {
	Stdout, Stderr string
	Code           int
}

// workspace returns a fresh workspace readable by any sandbox user.
func workspace(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	os.Chmod(d, 0o755)
	os.Chmod(filepath.Dir(d), 0o755)
	return d
}

func gb(t testing.TB, backend string, r Run) Out {
	t.Helper()
	if r.Dir == "" {
		r.Dir = workspace(t)
	}
	bargs, benv := backendArgs(backend)
	args := append([]string{"run"}, bargs...)
	if r.Config != "" {
		p := filepath.Join(t.TempDir(), "gatebridge.yaml")
		if err := os.WriteFile(p, []byte(r.Config), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append([]string{"--config", p}, args...)
	}
	args = append(args, r.Args...)
	args = append(args, "--")
	args = append(args, r.Command...)
	return gbRaw(t, r.Dir, append(benv, r.Env...), r.Stdin, r.Timeout, args...)
}

func gbRaw(t testing.TB, dir string, env []string, stdin []byte, timeout time.Duration, args ...string) Out {
	t.Helper()
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	// No controlling terminal: a gate that needs approval is denied at
	// once (run asks on /dev/tty), whoever runs the tests.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("gatebridge %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("gatebridge %v: hung for %v; stderr: %s", args, timeout, se.String())
	}
	return Out{so.String(), se.String(), code}
}

// sh runs a POSIX sh script in backend.
func sh(t testing.TB, backend, script string, extra ...string) Out {
	t.Helper()
	return gb(t, backend, Run{Args: extra, Command: []string{"sh", "-c", script}})
}

// JSONResult mirrors `run --json`.
type JSONResult struct {
	ExitCode    int               `json:"exit_code"`
	Stdout      string            `json:"stdout"`
	Stderr      string            `json:"stderr"`
	TimedOut    bool              `json:"timed_out"`
	Truncated   bool              `json:"truncated"`
	DurationMS  int64             `json:"duration_ms"`
	Answer      *string           `json:"answer"`
	Sandbox     string            `json:"sandbox"`
	SandboxInfo map[string]string `json:"sandbox_info"`
	SessionDir  string            `json:"session_dir"`
	Calls       []struct {
		ID         string   `json:"id"`
		Gate       string   `json:"gate"`
		Args       []string `json:"args"`
		ExitCode   int      `json:"exit_code"`
		Decision   string   `json:"decision"`
		DurationMS float64  `json:"duration_ms"`
		Error      string   `json:"error"`
	} `json:"calls"`
	SandboxReason string `json:"sandbox_reason"`
	CallsOmitted  int    `json:"calls_omitted"`
}

func gbJSON(t testing.TB, backend string, r Run) (JSONResult, Out) {
	t.Helper()
	r.Args = append([]string{"--json"}, r.Args...)
	out := gb(t, backend, r)
	var res JSONResult
	if err := json.Unmarshal([]byte(out.Stdout), &res); err != nil {
		t.Fatalf("bad JSON (%v): %q; stderr %q", err, out.Stdout, out.Stderr)
	}
	return res, out
}
