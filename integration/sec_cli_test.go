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
// auto (the default) must not run the command on the host. bwrap is made
// unusable both ways: missing from PATH, and a configured path that does
// not exist.
func TestSecAutoFailsClosed(t *testing.T) {
	for _, noBwrap := range []struct{ name, env string }{
		{"path", pathWithout(t, "bwrap")},
		{"config", "GATEBRIDGE_SANDBOX_BWRAP_PATH=/nonexistent/bwrap"},
	} {
		t.Run(noBwrap.name, func(t *testing.T) {
			ws := workspace(t)
			marker := filepath.Join(t.TempDir(), "ran")
			env := []string{noEngine, noBwrap.env, "GATEBRIDGE_CONFIG=", "XDG_CONFIG_HOME=" + t.TempDir()}
			out := gbRaw(t, ws, env, nil, 0, "run", "--", "sh", "-c", "touch "+marker)
			if out.Code != 125 || !strings.Contains(out.Stderr, "no sandbox is usable (docker: ") ||
				!strings.Contains(out.Stderr, "bwrap: ") || !strings.Contains(out.Stderr, "hint: install bubblewrap") ||
				strings.Contains(out.Stderr, "UNSANDBOXED") {
				t.Errorf("exit %d, stderr %q", out.Code, out.Stderr)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("auto ran the command unsandboxed")
			}
			// --json says so as an error object a runtime can act on.
			out = gbRaw(t, ws, env, nil, 0, "run", "--json", "--", "sh", "-c", "touch "+marker)
			var res struct {
				ExitCode int `json:"exit_code"`
				Error    struct{ Kind, Message, Hint string }
			}
			if err := json.Unmarshal([]byte(out.Stdout), &res); err != nil || out.Code != 125 || res.ExitCode != 125 ||
				res.Error.Kind != "sandbox_unavailable" || res.Error.Hint == "" {
				t.Errorf("--json: exit %d, stdout %q (%v)", out.Code, out.Stdout, err)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("auto --json ran the command unsandboxed")
			}
			// Allowed explicitly, it runs on the host with a warning.
			out = gbRaw(t, ws, append(env, "GATEBRIDGE_SANDBOX_ALLOW_UNSANDBOXED=true"), nil, 0, "run", "--", "sh", "-c", "touch "+marker)
			if out.Code != 0 || !strings.Contains(out.Stderr, "UNSANDBOXED") {
				t.Errorf("allow_unsandboxed: exit %d, stderr %q", out.Code, out.Stderr)
			}
			if _, err := os.Stat(marker); err != nil {
				t.Errorf("allow_unsandboxed: the command did not run: %v", err)
			}
		})
	}
}

// TestJSONErrorImageMissing: run --json names a missing image as such
// when pulling is off (sandbox.docker.pull: never), and a failed pull as
// its own kind (a registry on a closed loopback port: nothing leaves the
// machine).
func TestJSONErrorImageMissing(t *testing.T) {
	needBackend(t, "docker")
	for _, c := range []struct{ name, config, image, kind string }{
		{"never", "sandbox:\n  docker:\n    pull: never\n", "gatebridge-no-such-image:0", "image_missing"},
		{"pull", "", "127.0.0.1:1/gatebridge-no-such-image:0", "image_pull"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, out := gbJSON(t, "docker", Run{Args: []string{"--image", c.image}, Command: []string{"true"}, Config: c.config})
			var raw struct {
				Error struct{ Kind, Message, Hint string } `json:"error"`
			}
			json.Unmarshal([]byte(out.Stdout), &raw)
			if out.Code != 125 || res.ExitCode != 125 || raw.Error.Kind != c.kind || raw.Error.Hint == "" {
				t.Errorf("want kind %s: exit %d, stdout %q", c.kind, out.Code, out.Stdout)
			}
		})
	}
}

// TestSecAuditSymlinkRefused: a symlink planted at the audit path (say by
// a command that could write the log's directory) is refused before the
// command runs; the link's target is not written.
func TestSecAuditSymlinkRefused(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("keep\n"), 0o600)
	audit := filepath.Join(dir, "audit.jsonl")
	os.Symlink(victim, audit)
	marker := filepath.Join(t.TempDir(), "ran")
	cfg := "audit:\n  path: " + audit + "\n"
	out := gb(t, "local", Run{Config: cfg, Args: []string{"--json"}, Command: []string{"sh", "-c", "touch " + marker + "; gb_echo hi"}})
	var res struct {
		Error struct{ Kind, Message string }
	}
	json.Unmarshal([]byte(out.Stdout), &res)
	if out.Code != 125 || res.Error.Kind != "config" || !strings.Contains(res.Error.Message, "audit.path") ||
		!strings.Contains(res.Error.Message, "symbolic link") {
		t.Errorf("exit %d, stdout %q, stderr %q", out.Code, out.Stdout, out.Stderr)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep\n" {
		t.Errorf("the link's target was written: %q", b)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran without its audit log")
	}
}

// TestSecUntrustedConfigRefused: a config another user could have written
// (owned by them, group-writable, or in a directory anyone can write)
// defines a host shell gate; gatebridge refuses it (125) and runs
// nothing. The same file at a trusted place does give the host shell, so
// the refusal is what stops it.
func TestSecUntrustedConfigRefused(t *testing.T) {
	const hostsh = "gates:\n  commands:\n    - name: hostsh\n      command: [sh, -c]\n      allow_pattern: \"(?s).*\"\n      isolate: {host: true}\nsandbox:\n  backend: local\n"
	base := t.TempDir()
	os.Chmod(base, 0o755)
	try := func(cfg string) (Out, bool) {
		marker := filepath.Join(t.TempDir(), "pwned")
		out := gbRaw(t, workspace(t), nil, nil, 0, "--config", cfg, "run", "--", "sh", "-c", "hostsh 'touch "+marker+"'")
		_, err := os.Stat(marker)
		return out, err == nil
	}
	trusted := filepath.Join(base, "trusted.yaml")
	os.WriteFile(trusted, []byte(hostsh), 0o644)
	if out, pwned := try(trusted); !pwned {
		t.Fatalf("control: the trusted config did not run hostsh: exit %d, stderr %q", out.Code, out.Stderr)
	}

	cases := map[string]func() string{
		"group-writable": func() string {
			p := filepath.Join(base, "gw.yaml")
			os.WriteFile(p, []byte(hostsh), 0o644)
			os.Chmod(p, 0o664)
			return p
		},
		"world-writable-dir": func() string {
			d := filepath.Join(base, "open")
			os.Mkdir(d, 0o755)
			os.Chmod(d, 0o777)
			p := filepath.Join(d, "c.yaml")
			os.WriteFile(p, []byte(hostsh), 0o644)
			return p
		},
		"other-owner": func() string {
			if os.Geteuid() != 0 {
				return ""
			}
			p := filepath.Join(base, "theirs.yaml")
			os.WriteFile(p, []byte(hostsh), 0o644)
			os.Chown(p, 12345, 12345)
			return p
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			p := mk()
			if p == "" {
				t.Skip("needs root to give a file to another uid")
			}
			out, pwned := try(p)
			if pwned {
				t.Fatal("an untrusted config ran a host command")
			}
			if out.Code != 125 || !strings.Contains(out.Stderr, "refusing") || !strings.Contains(out.Stderr, "hint:") {
				t.Errorf("exit %d, stderr %q", out.Code, out.Stderr)
			}
		})
	}
}

// TestSecConfigInPersistentWorkspace: a persistent sandbox keeps the
// (writable) workspace it was started with. A config at that workspace's
// root, used by a run from a subdirectory (whose own workspace does not
// contain it), is still refused: the sandbox's commands could have
// written it. Also when the sandbox was started through a symlink to the
// workspace and the config is named by its real path.
func TestSecConfigInPersistentWorkspace(t *testing.T) {
	needBackend(t, "docker")
	for _, viaLink := range []bool{false, true} {
		t.Run(map[bool]string{false: "direct", true: "symlinked"}[viaLink], func(t *testing.T) {
			ws := workspace(t)
			startWS := ws
			if viaLink {
				startWS = filepath.Join(t.TempDir(), "link")
				os.Symlink(ws, startWS)
			}
			name := randName("cfgws")
			if out := gbRaw(t, ws, nil, nil, 0, "sandbox", "start", "--writable-workspace", "--workspace", startWS, name); out.Code != 0 {
				t.Fatalf("start: %s", out.Stderr)
			}
			t.Cleanup(func() { gbRaw(t, ws, nil, nil, 0, "sandbox", "stop", name) })
			cfg := filepath.Join(ws, "gb.yaml")
			os.WriteFile(cfg, []byte("gates:\n  commands:\n    - name: hostsh\n      command: [sh, -c]\n      allow_pattern: \"(?s).*\"\n      isolate: {host: true}\n"), 0o644)
			sub := filepath.Join(startWS, "sub")
			os.Mkdir(sub, 0o755)
			marker := filepath.Join(t.TempDir(), "pwned")
			out := gbRaw(t, sub, nil, nil, 0, "--config", cfg, "run", "--reuse", name, "--workspace", sub, "--", "sh", "-c", "hostsh 'touch "+marker+"'")
			if out.Code != 125 || !strings.Contains(out.Stderr, "refusing config file") || !strings.Contains(out.Stderr, "persistent sandbox "+name) {
				t.Errorf("exit %d, stdout %q, stderr %q", out.Code, out.Stdout, out.Stderr)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Error("a config in the persistent sandbox's workspace ran a host command")
			}
		})
	}
}
