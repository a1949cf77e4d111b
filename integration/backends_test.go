package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// noEngine points the docker client nowhere.
const noEngine = "DOCKER_HOST=unix:///nonexistent/docker.sock"

// pathWithout returns a PATH value: one directory of symlinks to every
// executable on the current PATH except the named ones.
func pathWithout(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	skip := map[string]bool{}
	for _, n := range names {
		skip[n] = true
	}
	for _, p := range filepath.SplitList(os.Getenv("PATH")) {
		ents, err := os.ReadDir(p)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if skip[e.Name()] {
				continue
			}
			link := filepath.Join(dir, e.Name())
			if _, err := os.Lstat(link); err == nil {
				continue // earlier PATH entries win
			}
			os.Symlink(filepath.Join(p, e.Name()), link)
		}
	}
	if _, err := exec.LookPath(filepath.Join(dir, "sh")); err != nil {
		t.Fatalf("no sh in the reduced PATH: %v", err)
	}
	return "PATH=" + dir
}

type doctorCheck struct {
	Check  string `json:"check"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Hint   string `json:"hint"`
}

func TestDoctor(t *testing.T) {
	out := gbRaw(t, workspace(t), nil, nil, 0, "doctor")
	if out.Code != 0 {
		t.Fatalf("doctor: exit %d\n%s%s", out.Code, out.Stdout, out.Stderr)
	}
	for _, want := range []string{"backend local", "backend bwrap", "docker engine", "docker image",
		"inotify max_user_watches", "inotify max_user_instances", "inotify max_queued_events",
		"session dir filesystem", "wake:", "watch:", "auto: would choose", "configured backend"} {
		if !strings.Contains(out.Stdout, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out.Stdout)
		}
	}
	for _, line := range strings.Split(strings.TrimRight(out.Stdout, "\n"), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || (f[0] != "ok" && f[0] != "warn" && f[0] != "problem" && f[0] != "hint:") {
			t.Errorf("line without a status: %q", line)
		}
	}

	js := gbRaw(t, workspace(t), nil, nil, 0, "doctor", "--json")
	if js.Code != 0 {
		t.Fatalf("doctor --json: exit %d\n%s", js.Code, js.Stderr)
	}
	var checks []doctorCheck
	if err := json.Unmarshal([]byte(js.Stdout), &checks); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, js.Stdout)
	}
	byName := map[string]doctorCheck{}
	for _, c := range checks {
		if c.Check == "" || c.Detail == "" {
			t.Errorf("incomplete check %+v", c)
		}
		switch c.Status {
		case "ok", "warn", "problem":
		default:
			t.Errorf("bad status %+v", c)
		}
		byName[c.Check] = c
	}
	if byName["backend local"].Status != "ok" {
		t.Errorf("local: %+v", byName["backend local"])
	}
	// What doctor says about bwrap and docker agrees with whether they run.
	for name, check := range map[string]string{"bwrap": "backend bwrap", "docker": "docker image"} {
		if err := probe(name); (err == nil) != (byName[check].Status == "ok") {
			t.Errorf("%s runs: %v; doctor says %+v", name, err == nil, byName[check])
		}
	}
}

func TestDoctorExitCode(t *testing.T) {
	env := []string{noEngine, pathWithout(t, "bwrap")}
	for _, tc := range []struct {
		backend string
		code    int
		want    string
	}{
		{"auto", 1, "sandbox.backend=auto cannot run here"},
		{"local", 0, "sandbox.backend=local can run here"},
		{"docker", 1, "sandbox.backend=docker cannot run here"},
		{"bwrap", 1, "sandbox.backend=bwrap cannot run here"},
	} {
		out := gbRaw(t, workspace(t), append(env, "GATEBRIDGE_SANDBOX_BACKEND="+tc.backend), nil, 0, "doctor")
		if out.Code != tc.code || !strings.Contains(out.Stdout, tc.want) {
			t.Errorf("%s: exit %d, want %d and %q:\n%s%s", tc.backend, out.Code, tc.code, tc.want, out.Stdout, out.Stderr)
		}
	}
	out := gbRaw(t, workspace(t), env, nil, 0, "doctor")
	for _, want := range []string{"hint: install bubblewrap", "DOCKER_HOST", "does not run commands unsandboxed"} {
		if !strings.Contains(out.Stdout, want) {
			t.Errorf("doctor without bwrap and docker lacks %q:\n%s", want, out.Stdout)
		}
	}
}

func unsandboxedLines(stderr string) int {
	n := 0
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "UNSANDBOXED") {
			n++
		}
	}
	return n
}

// With sandbox.allow_unsandboxed, auto falls back to local with one warning
// (without it, TestSecAutoFailsClosed).
func TestAutoFallsBackToLocalWhenAllowed(t *testing.T) {
	env := []string{noEngine, pathWithout(t, "bwrap"), "GATEBRIDGE_SANDBOX_ALLOW_UNSANDBOXED=true"}
	out := gb(t, "auto", Run{Env: env, Command: []string{"sh", "-c", "gb_echo hi"}})
	if out.Code != 0 || out.Stdout != "hi\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", out.Code, out.Stdout, out.Stderr)
	}
	if n := unsandboxedLines(out.Stderr); n != 1 {
		t.Errorf("want one UNSANDBOXED warning line, got %d:\n%s", n, out.Stderr)
	}
	res, out := gbJSON(t, "auto", Run{Env: env, Command: []string{"true"}})
	if res.Sandbox != "local" || !strings.Contains(res.SandboxReason, "docker:") || !strings.Contains(res.SandboxReason, "bwrap:") {
		t.Errorf("sandbox %q, reason %q", res.Sandbox, res.SandboxReason)
	}
	if n := unsandboxedLines(out.Stderr); n != 1 {
		t.Errorf("--json: want one UNSANDBOXED warning line, got %d:\n%s", n, out.Stderr)
	}
	// Choosing local explicitly silences the warning.
	out = gb(t, "local", Run{Env: env, Command: []string{"true"}})
	if out.Code != 0 || out.Stderr != "" {
		t.Errorf("--sandbox local: exit %d, stderr %q", out.Code, out.Stderr)
	}
}

func TestAutoChoosesBwrapWithoutDocker(t *testing.T) {
	needBackend(t, "bwrap")
	res, out := gbJSON(t, "auto", Run{Env: []string{noEngine}, Command: []string{"sh", "-c", "gb_echo hi"}})
	if res.Sandbox != "bwrap" || res.Stdout != "hi\n" || !strings.Contains(res.SandboxReason, "bwrap: usable") {
		t.Errorf("sandbox %q, reason %q, stdout %q, stderr %q", res.Sandbox, res.SandboxReason, res.Stdout, out.Stderr)
	}
	if unsandboxedLines(out.Stderr) != 0 {
		t.Errorf("warning with bwrap: %s", out.Stderr)
	}
}

func TestAutoChoosesDocker(t *testing.T) {
	needBackend(t, "docker")
	res, out := gbJSON(t, "auto", Run{Command: []string{"sh", "-c", "gb_echo hi"}})
	if res.Sandbox != "docker" || res.Stdout != "hi\n" || res.SandboxReason != "auto: docker: usable" {
		t.Errorf("sandbox %q, reason %q, stdout %q, stderr %q", res.Sandbox, res.SandboxReason, res.Stdout, out.Stderr)
	}
	// An absent image makes auto skip docker (it never pulls).
	res, _ = gbJSON(t, "auto", Run{Args: []string{"--image", "gatebridge-nosuch:img"}, Command: []string{"true"}})
	if res.Sandbox == "docker" || !strings.Contains(res.SandboxReason, "gatebridge-nosuch:img") {
		t.Errorf("image absent: sandbox %q, reason %q", res.Sandbox, res.SandboxReason)
	}
}

func TestDockerJSONReportsContainer(t *testing.T) {
	needBackend(t, "docker")
	res, out := gbJSON(t, "docker", Run{Command: []string{"sh", "-c", "gb_echo hi"}})
	if res.ExitCode != 0 || res.Sandbox != "docker" || res.SandboxInfo["image"] != "gatebridge-test:latest" ||
		len(res.SandboxInfo["container_id"]) < 12 {
		t.Errorf("result %+v, stderr %q", res, out.Stderr)
	}
}

func TestBackendUnavailableErrors(t *testing.T) {
	out := gb(t, "docker", Run{Env: []string{noEngine}, Command: []string{"true"}})
	if out.Code != 125 || !strings.Contains(out.Stderr, "hint:") || !strings.Contains(out.Stderr, "DOCKER_HOST") {
		t.Errorf("no engine: exit %d, stderr %q", out.Code, out.Stderr)
	}
	out = gb(t, "bwrap", Run{Env: []string{pathWithout(t, "bwrap")}, Command: []string{"true"}})
	if out.Code != 125 || !strings.Contains(out.Stderr, "hint:") || !strings.Contains(out.Stderr, "bubblewrap") {
		t.Errorf("no bwrap: exit %d, stderr %q", out.Code, out.Stderr)
	}
}

func TestDockerMissingImage(t *testing.T) {
	needBackend(t, "docker")
	out := gb(t, "docker", Run{Args: []string{"--image", "nosuch:img"}, Command: []string{"true"}})
	if out.Code != 125 || !strings.Contains(out.Stderr, "nosuch:img") || !strings.Contains(out.Stderr, "make test-image") {
		t.Errorf("exit %d, stderr %q", out.Code, out.Stderr)
	}
}

// A `sandbox start` whose image is missing (nothing can be pulled here)
// leaves no sessions root behind (issue 31, friction 6: it stayed in
// /dev/shm). The default session parent is the test's own (XDG_RUNTIME_DIR
// on /dev/shm).
func TestSandboxStartMissingImageLeavesNothing(t *testing.T) {
	needBackend(t, "docker")
	base, err := os.MkdirTemp("/dev/shm", "gbtest-xdg-")
	if err != nil {
		t.Skipf("no /dev/shm here: %v", err)
	}
	defer os.RemoveAll(base)
	name := randName("nosuch")
	out := gbRaw(t, workspace(t), []string{"XDG_RUNTIME_DIR=" + base}, nil, 0, "sandbox", "start", "--image", "nosuch:img", name)
	if out.Code == 0 || !strings.Contains(out.Stderr, "nosuch:img") {
		t.Errorf("exit %d, stderr %q", out.Code, out.Stderr)
	}
	left, _ := filepath.Glob(filepath.Join(base, "*", "*"))
	if len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
	if _, err := os.Stat(filepath.Join(base, fmt.Sprintf("gatebridge-%d", os.Geteuid()))); err != nil {
		t.Errorf("the start did not use the test's session parent (the test proves nothing): %v", err)
	}
}

func randName(prefix string) string {
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", prefix, os.Getpid(), hex.EncodeToString(b[:]))
}

func dockerCLI(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

type lsEntry struct {
	Name, ID, Image, State, Workspace string
	SessionsRoot                      string `json:"sessions_root"`
}

func sandboxLs(t *testing.T, dir string) map[string]lsEntry {
	t.Helper()
	out := gbRaw(t, dir, nil, nil, 0, "sandbox", "ls", "--json")
	if out.Code != 0 {
		t.Fatalf("sandbox ls: exit %d: %s", out.Code, out.Stderr)
	}
	var list []lsEntry
	if err := json.Unmarshal([]byte(out.Stdout), &list); err != nil {
		t.Fatalf("sandbox ls --json: %v: %s", err, out.Stdout)
	}
	m := map[string]lsEntry{}
	for _, e := range list {
		m[e.Name] = e
	}
	return m
}

func TestPersistentSandbox(t *testing.T) {
	needBackend(t, "docker")
	ws := workspace(t)
	os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("from the workspace\n"), 0o644)
	roots := t.TempDir()
	name := randName("t1")
	out := gbRaw(t, ws, nil, nil, 0, "sandbox", "start", "--sessions-root", filepath.Join(roots, "s"), name)
	if out.Code != 0 {
		t.Fatalf("sandbox start: exit %d: %s", out.Code, out.Stderr)
	}
	t.Cleanup(func() { gbRaw(t, ws, nil, nil, 0, "sandbox", "stop", name) })
	id := strings.TrimSpace(out.Stdout)

	// Starting it twice says how to reuse it.
	again := gbRaw(t, ws, nil, nil, 0, "sandbox", "start", "--sessions-root", filepath.Join(roots, "s"), name)
	if again.Code != 125 || !strings.Contains(again.Stderr, "--reuse "+name) {
		t.Errorf("second start: exit %d: %s", again.Code, again.Stderr)
	}

	reuse := func(json bool, cmd ...string) Out {
		args := []string{"run", "--reuse", name}
		if json {
			args = append(args, "--json")
		}
		return gbRaw(t, ws, nil, nil, 0, append(append(args, "--"), cmd...)...)
	}
	out = reuse(false, "sh", "-c", "gb_echo hi; echo x > /tmp/f; read_file hello.txt")
	if out.Code != 0 || out.Stdout != "hi\nfrom the workspace\n" {
		t.Fatalf("first command: exit %d, stdout %q, stderr %q", out.Code, out.Stdout, out.Stderr)
	}
	out = reuse(false, "cat", "/tmp/f")
	if out.Code != 0 || out.Stdout != "x\n" {
		t.Errorf("second command does not see /tmp/f: exit %d, stdout %q, stderr %q", out.Code, out.Stdout, out.Stderr)
	}
	// sandbox exec is run --reuse.
	out = gbRaw(t, ws, nil, nil, 0, "sandbox", "exec", "--json", name, "--", "sh", "-c", "gb_echo via-exec; cat /tmp/f")
	var res JSONResult
	if err := json.Unmarshal([]byte(out.Stdout), &res); err != nil || res.Stdout != "via-exec\nx\n" ||
		res.Sandbox != "docker" || res.SandboxInfo["container_id"] != id || res.SandboxInfo["mode"] != "persistent" {
		t.Errorf("sandbox exec --json: %v: %s %s", err, out.Stdout, out.Stderr)
	}

	// From outside its workspace (friction 5): sandbox exec works in the
	// sandbox's workspace; a --workspace outside it is refused with a hint
	// naming the sandbox's.
	elsewhere := t.TempDir()
	out = gbRaw(t, elsewhere, nil, nil, 0, "sandbox", "exec", name, "--", "sh", "-c", "pwd; read_file hello.txt")
	if out.Code != 0 || out.Stdout != "/workspace\nfrom the workspace\n" {
		t.Errorf("sandbox exec from elsewhere: exit %d, stdout %q, stderr %q", out.Code, out.Stdout, out.Stderr)
	}
	out = gbRaw(t, elsewhere, nil, nil, 0, "sandbox", "exec", "--workspace", elsewhere, name, "--", "true")
	if out.Code != 125 || !strings.Contains(out.Stderr, "--workspace "+ws) {
		t.Errorf("sandbox exec --workspace outside: exit %d, stderr %q", out.Code, out.Stderr)
	}

	// Concurrent commands get separate sessions and their own answers.
	var wg sync.WaitGroup
	outs := make([]Out, 2)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i] = reuse(false, "sh", "-c", fmt.Sprintf(`echo "$GATEBRIDGE_CALLS_DIR"; sleep 0.5; gb_echo call-%d; sleep 0.3; gb_echo again-%d`, i, i))
		}()
	}
	wg.Wait()
	var dirs []string
	for i, o := range outs {
		lines := strings.Split(strings.TrimSpace(o.Stdout), "\n")
		if o.Code != 0 || len(lines) != 3 || lines[1] != fmt.Sprintf("call-%d", i) || lines[2] != fmt.Sprintf("again-%d", i) {
			t.Fatalf("concurrent %d: exit %d, stdout %q, stderr %q", i, o.Code, o.Stdout, o.Stderr)
		}
		dirs = append(dirs, lines[0])
	}
	if dirs[0] == dirs[1] || !strings.HasPrefix(dirs[0], "/gatebridge/sessions/") {
		t.Errorf("sessions not separate: %v", dirs)
	}

	// ls lists it, with its workspace; stop removes it.
	e, ok := sandboxLs(t, ws)[name]
	if !ok || e.ID != id || e.State != "running" || e.Workspace != ws {
		t.Errorf("sandbox ls: %+v (found %v)", e, ok)
	}
	out = gbRaw(t, ws, nil, nil, 0, "sandbox", "stop", name)
	if out.Code != 0 {
		t.Fatalf("sandbox stop: exit %d: %s", out.Code, out.Stderr)
	}
	if _, ok := sandboxLs(t, ws)[name]; ok {
		t.Errorf("still listed after stop")
	}
	if got := dockerCLI(t, "ps", "-aq", "--filter", "id="+id); got != "" {
		t.Errorf("container %s still there after stop", got)
	}
	out = reuse(false, "true")
	if out.Code != 125 || !strings.Contains(out.Stderr, "gatebridge sandbox start "+name) {
		t.Errorf("reuse after stop: exit %d: %s", out.Code, out.Stderr)
	}
	// Stopping it again is not an error (it exited 125 before).
	out = gbRaw(t, ws, nil, nil, 0, "sandbox", "stop", name)
	if out.Code != 0 || !strings.Contains(out.Stderr, "is not running: nothing to stop") {
		t.Errorf("second stop: exit %d: %s", out.Code, out.Stderr)
	}
}

// An unknown command under docker says what a shell says, with 127, not
// tini's "[FATAL tini (6)] exec nosuchcmd failed".
func TestDockerUnknownCommand(t *testing.T) {
	needBackend(t, "docker")
	out := gb(t, "docker", Run{Command: []string{"gb-nosuchcmd", "x"}})
	if out.Code != 127 || out.Stderr != "gatebridge: gb-nosuchcmd: command not found\n" {
		t.Errorf("exit %d, stderr %q", out.Code, out.Stderr)
	}
}

func TestSandboxPrune(t *testing.T) {
	needBackend(t, "docker")
	ws := workspace(t)
	host, _ := os.Hostname()
	// A per-command container whose gatebridge process is gone.
	deadPID := 999999
	for ; ; deadPID++ {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", deadPID)); os.IsNotExist(err) {
			break
		}
	}
	leftover := dockerCLI(t, "run", "-d", "--network", "none",
		"--label", "io.gatebridge.owner=gatebridge", "--label", fmt.Sprintf("io.gatebridge.pid=%d", deadPID),
		"--label", "io.gatebridge.host="+host, "--label", "io.gatebridge.session=gb-prune-test",
		"gatebridge-test:latest", "sleep", "300")
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", leftover).Run() })
	// One whose process is alive (this test) stays.
	alive := dockerCLI(t, "run", "-d", "--network", "none",
		"--label", "io.gatebridge.owner=gatebridge", "--label", fmt.Sprintf("io.gatebridge.pid=%d", os.Getpid()),
		"--label", "io.gatebridge.host="+host, "gatebridge-test:latest", "sleep", "300")
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", alive).Run() })
	// A persistent sandbox that stopped is kept unless --all.
	name := randName("prune")
	if out := gbRaw(t, ws, nil, nil, 0, "sandbox", "start", "--sessions-root", t.TempDir(), name); out.Code != 0 {
		t.Fatalf("sandbox start: %s", out.Stderr)
	}
	t.Cleanup(func() { gbRaw(t, ws, nil, nil, 0, "sandbox", "stop", name) })
	dockerCLI(t, "kill", "gatebridge-"+name)

	out := gbRaw(t, ws, nil, nil, 0, "sandbox", "prune")
	if out.Code != 0 {
		t.Fatalf("prune: exit %d: %s", out.Code, out.Stderr)
	}
	if got := dockerCLI(t, "ps", "-aq", "--filter", "id="+leftover); got != "" {
		t.Errorf("leftover %s not pruned; prune said %q", leftover[:12], out.Stdout)
	}
	if got := dockerCLI(t, "ps", "-aq", "--filter", "id="+alive); got == "" {
		t.Errorf("container of a live process was pruned")
	}
	if _, ok := sandboxLs(t, ws)[name]; !ok {
		t.Errorf("stopped persistent sandbox pruned without --all")
	}
	out = gbRaw(t, ws, nil, nil, 0, "sandbox", "prune", "--all")
	if out.Code != 0 || !strings.Contains(out.Stdout, "gatebridge-"+name) {
		t.Errorf("prune --all: exit %d, stdout %q, stderr %q", out.Code, out.Stdout, out.Stderr)
	}
	if _, ok := sandboxLs(t, ws)[name]; ok {
		t.Errorf("stopped persistent sandbox kept by prune --all")
	}
}
