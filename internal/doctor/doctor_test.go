package doctor

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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

// doctor says which config was read, and warns about a ./gatebridge.yaml
// that is never read (older versions read it).
func TestConfigChecks(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	if c := configCheck(Options{}); c.Status != statusOK || !strings.Contains(c.Detail, "none") {
		t.Errorf("no config: %+v", c)
	}
	if _, found := ignoredCwdConfig(Options{}); found {
		t.Error("warned without a ./gatebridge.yaml")
	}
	os.WriteFile(filepath.Join(dir, "gatebridge.yaml"), []byte("sandbox:\n  backend: local\n"), 0o600)
	if c, found := ignoredCwdConfig(Options{}); !found || c.Status != statusWarn || !strings.Contains(c.Detail, "never read") || c.Hint == "" {
		t.Errorf("./gatebridge.yaml: %+v %v", c, found)
	}
	p := filepath.Join(t.TempDir(), "c.yaml")
	if c := configCheck(Options{ConfigFile: p, ConfigGiven: p}); !strings.Contains(c.Detail, "read "+p) {
		t.Errorf("with --config: %+v", c)
	}
}
