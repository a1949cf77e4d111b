package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatebridge/gatebridge/bridge"
)

func TestClassifyFS(t *testing.T) {
	for _, tc := range []struct {
		magic int64
		name  string
		lossy bool
		known bool
	}{
		{0x01021994, "tmpfs", false, true},
		{0xEF53, "ext2/3/4", false, true},
		{0x58465342, "xfs", false, true},
		{0x9123683E, "btrfs", false, true},
		{0x6969, "nfs", true, true},
		{0x517B, "smb", true, true},
		{0xFE534D42, "smb2", true, true},
		{0xFF534D42, "cifs", true, true},
		{0x65735546, "fuse", true, true},
		{0x794C7630, "overlayfs", true, true},
		{0x1234, "unknown (0x1234)", false, false},
	} {
		k := classifyFS(tc.magic)
		if k.Name != tc.name || k.Lossy != tc.lossy || k.Known != tc.known {
			t.Errorf("classifyFS(%#x) = %+v, want %s lossy=%v known=%v", tc.magic, k, tc.name, tc.lossy, tc.known)
		}
	}
}

func TestFSResult(t *testing.T) {
	c := fsResult("session dir", "/mnt/x", classifyFS(0x6969))
	if c.Status != statusWarn || !strings.Contains(c.Detail, "nfs") || !strings.Contains(c.Detail, "rescan") || c.Hint == "" {
		t.Errorf("nfs: %+v", c)
	}
	c = fsResult("session dir", "/tmp", classifyFS(0x01021994))
	if c.Status != statusOK || !strings.Contains(c.Detail, "tmpfs") {
		t.Errorf("tmpfs: %+v", c)
	}
	c = fsResult("session dir", "/tmp", classifyFS(0x42))
	if c.Status != statusOK || !strings.Contains(c.Detail, "rescan") {
		t.Errorf("unknown: %+v", c)
	}
}

func TestFSCheckMissingDirUsesParent(t *testing.T) {
	c := fsCheck("session dir", t.TempDir()+"/not/yet/there")
	if c.Status == statusProblem || strings.Contains(c.Detail, "cannot statfs") {
		t.Errorf("%+v", c)
	}
}

func TestInotifyCheck(t *testing.T) {
	for _, tc := range []struct {
		raw    string
		err    error
		status string
		want   string
	}{
		{"524288\n", nil, statusOK, "524288"},
		{"16384", nil, statusOK, "16384"},
		{"1024\n", nil, statusWarn, "1024, below 16384"},
		{"x\n", nil, statusWarn, "unreadable"},
		{"", errors.New("no such file"), statusWarn, "cannot read"},
	} {
		c := inotifyCheck("max_queued_events", tc.raw, tc.err, 16384, "effect", "sysctl hint")
		if c.Status != tc.status || !strings.Contains(c.Detail, tc.want) {
			t.Errorf("%q: %+v", tc.raw, c)
		}
		if c.Check != "inotify max_queued_events" {
			t.Errorf("check name %q", c.Check)
		}
		if tc.status == statusWarn && tc.err == nil && tc.want != "unreadable" && c.Hint != "sysctl hint" {
			t.Errorf("%q: no hint: %+v", tc.raw, c)
		}
	}
}

func TestInotifyChecksReadsAllThree(t *testing.T) {
	var read []string
	cs := inotifyChecks(func(name string) (string, error) {
		read = append(read, name)
		return "8192\n", nil
	})
	if len(cs) != 3 || len(read) != 3 {
		t.Fatalf("got %d checks reading %v", len(cs), read)
	}
	for _, name := range []string{"max_user_watches", "max_user_instances", "max_queued_events"} {
		if !strings.Contains(strings.Join(read, " "), "/proc/sys/fs/inotify/"+name) {
			t.Errorf("%s not read: %v", name, read)
		}
	}
	if cs[0].Status != statusOK || cs[2].Status != statusWarn {
		t.Errorf("8192: watches %s, queued %s", cs[0].Status, cs[2].Status)
	}
}

func TestWakeCheck(t *testing.T) {
	c := wakeCheck(t.TempDir())
	if c.Status != statusOK || !strings.Contains(c.Detail, "ENXIO") {
		t.Errorf("%+v", c)
	}
	c = wakeCheck("/nonexistent/dir")
	if c.Status != statusProblem {
		t.Errorf("missing dir: %+v", c)
	}
}

func TestPrintChecks(t *testing.T) {
	cs := []checkResult{
		{Check: "a", Status: statusOK, Detail: "fine"},
		{Check: "b", Status: statusProblem, Detail: "broken", Hint: "fix it"},
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

// doctor says which config was read, and warns about a ./gatebridge.yaml
// that is never read (older versions read it).
func TestDoctorConfigChecks(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("GATEBRIDGE_CONFIG", "")
	cfg, _, err := loadConfig("", nil, newBackends())
	if err != nil {
		t.Fatal(err)
	}
	if c := configCheck(cfg); c.Status != statusOK || !strings.Contains(c.Detail, "none") {
		t.Errorf("no config: %+v", c)
	}
	if _, found := ignoredCwdConfig(cfg); found {
		t.Error("warned without a ./gatebridge.yaml")
	}
	os.WriteFile(filepath.Join(dir, "gatebridge.yaml"), []byte("sandbox:\n  backend: local\n"), 0o600)
	if cfg, _, err = loadConfig("", nil, newBackends()); err != nil || cfg.Sandbox.Backend != "auto" {
		t.Fatalf("./gatebridge.yaml was read: %v %+v", err, cfg)
	}
	if c, found := ignoredCwdConfig(cfg); !found || c.Status != statusWarn || !strings.Contains(c.Detail, "never read") || c.Hint == "" {
		t.Errorf("./gatebridge.yaml: %+v %v", c, found)
	}
	p := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(p, []byte("sandbox:\n  backend: local\n"), 0o600)
	cfg, _, err = loadConfig(p, nil, newBackends())
	if err != nil {
		t.Fatal(err)
	}
	if c := configCheck(cfg); !strings.Contains(c.Detail, "read "+p) {
		t.Errorf("with --config: %+v", c)
	}
}
