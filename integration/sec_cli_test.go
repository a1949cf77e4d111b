package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecPlantedConfigIgnored: a command with a writable workspace plants a
// gatebridge.yaml that defines a host shell gate. The next run from that
// directory (the default workspace) must not load it.
func TestSecPlantedConfigIgnored(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		ws := workspace(t)
		os.Chmod(ws, 0o777) // any sandbox uid may write it
		plant := `cat > gatebridge.yaml <<'Y'
gates:
  commands:
    - name: hostsh
      command: [sh, -c]
      allow_pattern: "(?s).*"
Y
echo planted`
		out := gb(t, backend, Run{Dir: ws, Args: []string{"--writable-workspace"}, Command: []string{"sh", "-c", plant}})
		if out.Code != 0 || !strings.Contains(out.Stdout, "planted") {
			t.Fatalf("plant: exit %d, stdout %q, stderr %q", out.Code, out.Stdout, out.Stderr)
		}
		if _, err := os.Stat(filepath.Join(ws, "gatebridge.yaml")); err != nil {
			t.Fatalf("the planted config is not there: %v", err)
		}
		marker := filepath.Join(t.TempDir(), "pwned")
		out = gbRaw(t, ws, []string{"GATEBRIDGE_CONFIG=", "XDG_CONFIG_HOME=" + t.TempDir()}, nil, 0,
			"run", "--sandbox", backend, "--", "sh", "-c", "hostsh 'touch "+marker+"'; echo \"exit $?\"")
		if !strings.Contains(out.Stdout, "exit 127") {
			t.Errorf("hostsh: stdout %q, stderr %q (want command not found, 127)", out.Stdout, out.Stderr)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Error("the planted config ran a host command")
		}
	})
}

// TestSecAutoFailsClosed: with neither docker nor bwrap usable, --sandbox
// auto (the default) must not run the command on the host.
func TestSecAutoFailsClosed(t *testing.T) {
	ws := workspace(t)
	marker := filepath.Join(t.TempDir(), "ran")
	env := []string{"DOCKER_HOST=unix:///nonexistent/docker.sock", "GATEBRIDGE_SANDBOX_BWRAP_PATH=/nonexistent/bwrap",
		"GATEBRIDGE_CONFIG=", "XDG_CONFIG_HOME=" + t.TempDir()}
	out := gbRaw(t, ws, env, nil, 0, "run", "--", "sh", "-c", "touch "+marker)
	if out.Code != 125 || !strings.Contains(out.Stderr, "no sandbox is usable (docker: ") ||
		!strings.Contains(out.Stderr, "bwrap: ") || !strings.Contains(out.Stderr, "hint: install bubblewrap") {
		t.Errorf("exit %d, stderr %q", out.Code, out.Stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("auto ran the command unsandboxed")
	}
	// Allowed explicitly, it runs on the host with a warning.
	out = gbRaw(t, ws, append(env, "GATEBRIDGE_SANDBOX_ALLOW_UNSANDBOXED=true"), nil, 0, "run", "--", "sh", "-c", "touch "+marker)
	if out.Code != 0 || !strings.Contains(out.Stderr, "UNSANDBOXED") {
		t.Errorf("allow_unsandboxed: exit %d, stderr %q", out.Code, out.Stderr)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("allow_unsandboxed: the command did not run: %v", err)
	}
}

// TestJSONErrorImageMissing: run --json names a missing image as such.
func TestJSONErrorImageMissing(t *testing.T) {
	needBackend(t, "docker")
	res, out := gbJSON(t, "docker", Run{Args: []string{"--image", "gatebridge-no-such-image:0"}, Command: []string{"true"}})
	var raw struct {
		Error struct{ Kind, Message, Hint string } `json:"error"`
	}
	json.Unmarshal([]byte(out.Stdout), &raw)
	if out.Code != 125 || res.ExitCode != 125 || raw.Error.Kind != "image_missing" || raw.Error.Hint == "" {
		t.Errorf("exit %d, stdout %q", out.Code, out.Stdout)
	}
}
