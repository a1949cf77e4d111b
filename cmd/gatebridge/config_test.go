package main

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestExampleConfigMatchesDefaults(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	def, _, err := loadConfig("", nil)
	if err != nil {
		t.Fatal(err)
	}
	file, _, err := loadConfig(filepath.Join(repoRoot(t), "configs", "gatebridge.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(def, file) {
		t.Fatalf("configs/gatebridge.yaml differs from the defaults:\n file %+v\n  def %+v", file, def)
	}
	// every default key is documented in the file
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "configs", "gatebridge.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	flatten("", m, keys)
	var missing []string
	for k := range defaults {
		if !keys[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("keys missing from configs/gatebridge.yaml: %v", missing)
	}
	for k := range keys {
		if _, ok := defaults[k]; !ok {
			t.Errorf("configs/gatebridge.yaml has %s, which has no default", k)
		}
	}
}

func flatten(prefix string, m map[string]any, out map[string]bool) {
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			flatten(prefix+k+".", sub, out)
			continue
		}
		out[prefix+k] = true
	}
}

func repoRoot(t *testing.T) string {
	wd, _ := os.Getwd()
	for d := wd; d != "/"; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
	}
	// tests run in the package dir; chdir above moved us
	return filepath.Join(origWD, "..", "..")
}

var origWD, _ = os.Getwd()

func TestConfigErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		yaml, env, want string
	}{
		{"sandbox:\n  timeot: 1s\n", "", "sandbox.timeot: unknown key"},
		{"sandbox:\n  timeout: soon\n", "", "sandbox.timeout: bad value"},
		{"sandbox:\n  backend: vm\n", "", `sandbox.backend: unknown backend "vm"`},
		{"bridge:\n  limits:\n    max_calls: -1\n", "", "bridge.limits.max_calls: must not be negative"},
		{"", "GATEBRIDGE_BRIDGE_WATCH=sometimes", `bridge.watch: unknown mode "sometimes"`},
		{"", "GATEBRIDGE_BRIDGE_LIMITS_MAX_ARGS=many", "bridge.limits.max_args: bad value"},
		{"gates:\n  commands:\n    - name: x\n", "", "gates.commands[0].command: missing"},
		{"gates:\n  commands:\n    - name: x\n      command: [true]\n      colour: red\n", "", "colour"},
	} {
		dir := t.TempDir()
		p := filepath.Join(dir, "gatebridge.yaml")
		os.WriteFile(p, []byte(tc.yaml), 0o644)
		if tc.env != "" {
			k, v, _ := strings.Cut(tc.env, "=")
			t.Setenv(k, v)
		}
		_, _, err := loadConfig(p, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("yaml %q env %q: err %v, want %q", tc.yaml, tc.env, err, tc.want)
		}
		if tc.env != "" {
			k, _, _ := strings.Cut(tc.env, "=")
			os.Unsetenv(k)
		}
	}
}

func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "gatebridge.yaml")
	os.WriteFile(p, []byte("sandbox:\n  timeout: 5s\n  kill_grace: 3s\nbridge:\n  watch: poll\n"), 0o644)
	t.Setenv("GATEBRIDGE_SANDBOX_KILL_GRACE", "4s")
	cmd := newRunCmd()
	cmd.Flags().Set("watch", "events")
	cfg, _, err := loadConfig(p, cmd.Flags())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Sandbox.Timeout.String() != "5s" || cfg.Sandbox.KillGrace.String() != "4s" || cfg.Bridge.Watch != "events" {
		t.Fatalf("precedence wrong: timeout %v (file), kill_grace %v (env), watch %q (flag)", cfg.Sandbox.Timeout, cfg.Sandbox.KillGrace, cfg.Bridge.Watch)
	}
	if cfg.Bridge.Limits.MaxCalls != 100000 {
		t.Fatalf("default lost: %d", cfg.Bridge.Limits.MaxCalls)
	}
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
	if _, _, err := loadConfig(p, nil); err != nil {
		t.Fatalf("own config refused: %v", err)
	}
	if err := os.Chown(p, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	_, _, err := loadConfig(p, nil)
	if err == nil || !strings.Contains(err.Error(), "owned by uid 4242, not you") {
		t.Errorf("config owned by uid 4242: %v", err)
	}
	os.Chown(p, 0, 0)
	os.Chown(dir, 4242, 4242)
	_, _, err = loadConfig(p, nil)
	if err == nil || !strings.Contains(err.Error(), "directory "+dir) {
		t.Errorf("config in a dir owned by uid 4242: %v", err)
	}
}
