package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/local"
)

// backends is a registry with the local backend, for configs that name it.
func backends(t *testing.T) Registered {
	reg := sandbox.NewRegistry()
	if err := local.Register(reg); err != nil {
		t.Fatal(err)
	}
	// As cmd/gatebridge, which holds the backends' defaults (some from the
	// env need one to be known).
	return Registered{Registry: reg, DefaultMaxTools: 256, Defaults: map[string]any{
		"sandbox.docker.pull": "missing", "sandbox.docker.pull_timeout": "10m",
		"sandbox.gate_uid": 1, "sandbox.gate_gid": 1,
	}}
}

// loadConfig is Load as cmd/gatebridge calls it, with the config checked
// for its place too.
func loadConfig(t *testing.T, path string, _ any, reg Registered) (*Config, string, error) {
	l, used, err := Load(path, nil, reg)
	if err != nil {
		return nil, used, err
	}
	if used != "" {
		if err := l.CheckPlace(used, l.Real); err != nil {
			return nil, used, err
		}
	}
	return l.Config, used, nil
}

// A config owned by another (non-root) user is refused: that user could
// define host commands that run as us.
func TestConfigOwnedByOtherUserRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown a file to another uid")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(p, []byte("sandbox:\n  backend: local\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadConfig(t, p, nil, backends(t)); err != nil {
		t.Fatalf("own config refused: %v", err)
	}
	if err := os.Chown(p, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	_, _, err := loadConfig(t, p, nil, backends(t))
	if err == nil || !strings.Contains(err.Error(), "owned by uid 4242, not you") {
		t.Errorf("config owned by uid 4242: %v", err)
	}
	os.Chown(p, 0, 0)
	os.Chown(dir, 4242, 4242)
	_, _, err = loadConfig(t, p, nil, backends(t))
	if err == nil || !strings.Contains(err.Error(), "directory "+dir) {
		t.Errorf("config in a dir owned by uid 4242: %v", err)
	}
}

// Symlinks on the way to a config are judged too: a link someone else owns
// can be re-pointed by them, and a link in a directory others can write
// can be replaced, whatever its target.
func TestConfigSymlinkTrust(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown a symlink to another uid")
	}
	t.Chdir(t.TempDir())
	base := t.TempDir()
	os.Chmod(base, 0o755)
	good := filepath.Join(base, "good.yaml")
	if err := os.WriteFile(good, []byte("sandbox:\n  backend: local\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	load := func(p string) error { _, _, err := loadConfig(t, p, nil, backends(t)); return err }

	// A link we own, in a directory only we can write: fine.
	mine := filepath.Join(base, "mine.yaml")
	os.Symlink(good, mine)
	if err := load(mine); err != nil {
		t.Fatalf("own link refused: %v", err)
	}
	// The same link owned by uid 4242.
	theirs := filepath.Join(base, "theirs.yaml")
	os.Symlink(good, theirs)
	if err := os.Lchown(theirs, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if err := load(theirs); err == nil || !strings.Contains(err.Error(), "symlink "+theirs) || !strings.Contains(err.Error(), "owned by uid 4242") {
		t.Errorf("link owned by uid 4242: %v", err)
	}
	// A link of ours, but in a world-writable (not sticky) directory:
	// anyone could replace it. Its target is fine; the path is not.
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o755)
	os.Chmod(open, 0o777)
	inOpen := filepath.Join(open, "c.yaml")
	os.Symlink(good, inOpen)
	if err := load(inOpen); err == nil || !strings.Contains(err.Error(), "directory "+open) || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("link in a world-writable dir: %v", err)
	}
	// Sticky (like /tmp): others cannot replace our link there.
	os.Chmod(open, 0o777|os.ModeSticky)
	if err := load(inOpen); err != nil {
		t.Errorf("our link in a sticky dir refused: %v", err)
	}
	// A chain: link -> dir link in a world-writable dir -> good. The middle
	// directory is on neither the given path nor the final one.
	os.Chmod(open, 0o777)
	os.Symlink(base, filepath.Join(open, "dir"))
	chain := filepath.Join(base, "chain.yaml")
	os.Symlink(filepath.Join(open, "dir", "good.yaml"), chain)
	if err := load(chain); err == nil || !strings.Contains(err.Error(), "directory "+open) {
		t.Errorf("chain through a world-writable dir: %v", err)
	}
	// A link to a group-writable file is refused for the file.
	gw := filepath.Join(base, "gw.yaml")
	os.WriteFile(gw, []byte("sandbox:\n  backend: local\n"), 0o644)
	os.Chmod(gw, 0o664)
	toGW := filepath.Join(base, "to-gw.yaml")
	os.Symlink(gw, toGW)
	if err := load(toGW); err == nil || !strings.Contains(err.Error(), "writable by group or others (mode -rw-rw-r--)") {
		t.Errorf("link to a group-writable file: %v", err)
	}
}

// Every duration key written as a bare YAML number is an error naming the
// key (30 would be 30ns: the command killed at once).
func TestConfigDurationNumbersRefused(t *testing.T) {
	t.Chdir(t.TempDir())
	dir := t.TempDir()
	n := 0
	for key := range knownKeys(reflect.TypeOf(Config{}), "") {
		if !isDurationKey(key) {
			continue
		}
		n++
		// A section by name (mcp.servers.*.timeout): name it x.
		named := strings.Contains(key, "*")
		key := strings.ReplaceAll(key, "*", "x")
		// nested YAML for a.b.c: 30
		parts := strings.Split(key, ".")
		var b strings.Builder
		for i, p := range parts {
			b.WriteString(strings.Repeat("  ", i) + p + ":")
			if i == len(parts)-1 {
				b.WriteString(" 30")
			}
			b.WriteString("\n")
		}
		p := filepath.Join(dir, strings.ReplaceAll(key, ".", "_")+".yaml")
		os.WriteFile(p, []byte(b.String()), 0o600)
		_, _, err := loadConfig(t, p, nil, backends(t))
		if err == nil || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "write 30s") {
			t.Errorf("%s: 30: %v", key, err)
		}
		if named {
			continue // no environment variable names a section by name
		}
		// From the environment too.
		t.Setenv("GATEBRIDGE_"+strings.ToUpper(strings.ReplaceAll(key, ".", "_")), "30")
		_, _, err = loadConfig(t, "", nil, backends(t))
		if err == nil || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "write 30s") {
			t.Errorf("%s from the env: %v", key, err)
		}
		os.Unsetenv("GATEBRIDGE_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_")))
	}
	if n < 5 {
		t.Fatalf("only %d duration keys found", n)
	}
	// 0 needs no unit (no limit).
	p := filepath.Join(dir, "zero.yaml")
	os.WriteFile(p, []byte("sandbox:\n  timeout: 0\n"), 0o600)
	if cfg, _, err := loadConfig(t, p, nil, backends(t)); err != nil || cfg.Sandbox.Timeout != 0 {
		t.Errorf("timeout: 0: %v", err)
	}
}

func isDurationKey(key string) bool {
	t := reflect.TypeOf(Config{})
	for _, p := range strings.Split(key, ".") {
		if p == "*" && t.Kind() == reflect.Map {
			t = t.Elem()
			continue
		}
		if t.Kind() == reflect.Pointer {
			t = t.Elem() // an optional section (policy.commands)
		}
		if t.Kind() != reflect.Struct {
			return false
		}
		found := false
		for i := range t.NumField() {
			if t.Field(i).Tag.Get("mapstructure") == p {
				t = t.Field(i).Type
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return t == reflect.TypeOf(time.Duration(0))
}

// A command gate's flag may be written as a plain string; options with a
// value need the {name, value} form.
func TestConfigOptionShorthand(t *testing.T) {
	p := filepath.Join(t.TempDir(), "gatebridge.yaml")
	os.WriteFile(p, []byte("gates:\n  commands:\n    - name: git_log\n      command: [git, log]\n"+
		"      options: [--oneline, {name: -n, value: \"[0-9]+\"}]\n"), 0o644)
	cfg, _, err := loadConfig(t, p, nil, backends(t))
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Gates.Commands[0].Options
	if len(got) != 2 || got[0] != (OptionConfig{Name: "--oneline"}) || got[1] != (OptionConfig{Name: "-n", Value: "[0-9]+"}) {
		t.Errorf("options %+v", got)
	}
}
