package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/sandbox"
)

func TestPrintChecks(t *testing.T) {
	cs := []checkResult{
		{Check: "a", Status: sandbox.StatusOK, Detail: "fine"},
		{Check: "b", Status: sandbox.StatusProblem, Detail: "broken", Hint: "fix it"},
	}
	var buf bytes.Buffer
	if err := printChecks(&buf, cs, false); err != nil {
		t.Fatal(err)
	}
	want := "ok       a: fine\nproblem  b: broken\n         hint: fix it\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
	buf.Reset()
	if err := printChecks(&buf, cs, true); err != nil {
		t.Fatal(err)
	}
	var back []checkResult
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || len(back) != 2 || back[1].Hint != "fix it" {
		t.Errorf("json %s: %v", buf.String(), err)
	}
}

func TestDoctorLocalExitCode(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("DOCKER_HOST", "unix:///nonexistent")
	t.Setenv("PATH", "/nonexistent")
	var out, errb bytes.Buffer
	if code := run([]string{"doctor", "--sandbox", "local"}, nil, &out, &errb); code != 0 {
		t.Errorf("local: exit %d\n%s%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"backend local", "problem  backend bwrap", "hint: install bubblewrap", "docker engine", "auto: no sandbox is usable", "does not run commands unsandboxed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := run([]string{"doctor", "--sandbox", "bwrap"}, nil, &out, &errb); code != 1 {
		t.Errorf("bwrap without bwrap: exit %d, want 1\n%s", code, out.String())
	}
	out.Reset()
	// auto fails closed: no sandbox here is a problem, not a local fallback.
	if code := run([]string{"doctor"}, nil, &out, &errb); code != 1 {
		t.Errorf("auto: exit %d, want 1\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "sandbox.backend=auto cannot run here") {
		t.Errorf("auto line missing:\n%s", out.String())
	}
}

// doctor checks the directory sessions really go to: bridge.session_dir,
// else bridge.DefaultDir (a tmpfs when one is writable), not the temp dir.
func TestDoctorChecksDefaultSessionDir(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("DOCKER_HOST", "unix:///nonexistent")
	var out, errb bytes.Buffer
	run([]string{"doctor", "--sandbox", "local"}, nil, &out, &errb)
	want := "session dir filesystem: " + bridge.DefaultDir() + " is on"
	if !strings.Contains(out.String(), want) {
		t.Errorf("missing %q in\n%s", want, out.String())
	}
}

// ./gatebridge.yaml is never read (older versions read it; doctor warns
// about it: internal/doctor's TestConfigChecks).
func TestCwdConfigNotRead(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("GATEBRIDGE_CONFIG", "")
	os.WriteFile(filepath.Join(dir, "gatebridge.yaml"), []byte("sandbox:\n  backend: local\n"), 0o600)
	if cfg, _, err := loadConfig("", nil, newBackends()); err != nil || cfg.Sandbox.Backend != "auto" {
		t.Fatalf("./gatebridge.yaml was read: %v %+v", err, cfg)
	}
}
