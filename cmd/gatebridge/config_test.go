package main

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/internal/config"
	"github.com/gatebridge/gatebridge/sandbox/docker"

	"gopkg.in/yaml.v3"
)

func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "gatebridge.yaml")
	os.WriteFile(p, []byte("sandbox:\n  timeout: 5s\n  kill_grace: 3s\nbridge:\n  watch: poll\n"), 0o644)
	t.Setenv("GATEBRIDGE_SANDBOX_KILL_GRACE", "4s")
	cmd := newRunCmd(&app{backends: newBackends(), kinds: newKinds()})
	cmd.Flags().Set("watch", "events")
	cfg, _, err := loadConfig(p, cmd.Flags(), newBackends())
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

// The CLI's defaults are the library's: max_search_file_bytes was 4 MiB in
// the CLI and 1 MiB in the library.
func TestDefaultsEqualLibrary(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("GATEBRIDGE_CONFIG", "")
	cfg, _, err := loadConfig("", nil, newBackends())
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.BridgeLimits(); got != bridge.DefaultLimits() {
		t.Errorf("bridge limits:\n cli %+v\n lib %+v", got, bridge.DefaultLimits())
	}
	if d := dockerConfig(cfg); d.Pull != docker.PullMissing || d.PullTimeout != docker.DefaultPullTimeout || len(d.Images) != 0 {
		t.Errorf("docker image defaults: pull %q, pull_timeout %s, images %v", d.Pull, d.PullTimeout, d.Images)
	}
	g := cfg.Gates
	if g.MaxFileBytes != gates.DefaultMaxFileBytes || g.MaxSearchMatches != gates.DefaultMaxSearchMatches ||
		g.MaxSearchFiles != gates.DefaultMaxSearchFiles || g.MaxSearchFileBytes != gates.DefaultMaxSearchFileBytes {
		t.Errorf("gate defaults: cli %+v", g)
	}
}

// serve --pool is sandbox.pool.size; the file's idle and max_total stay.
func TestConfigPoolFlag(t *testing.T) {
	p := filepath.Join(t.TempDir(), "gatebridge.yaml")
	os.WriteFile(p, []byte("sandbox:\n  pool:\n    size: 1\n    max_total: 5\n    idle: 30s\n"), 0o644)
	cmd := newServeCmd(&app{backends: newBackends(), kinds: newKinds()})
	cmd.Flags().Set("pool", "3")
	cfg, _, err := loadConfig(p, cmd.Flags(), newBackends())
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Sandbox.Pool; got.Size != 3 || got.MaxTotal != 5 || got.Idle != 30*time.Second {
		t.Fatalf("pool config %+v, want size 3 (flag), max_total 5, idle 30s", got)
	}
}

func TestExampleConfigMatchesDefaults(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	def, _, err := loadConfig("", nil, newBackends())
	if err != nil {
		t.Fatal(err)
	}
	file, _, err := loadConfig(filepath.Join(repoRoot(t), "configs", "gatebridge.yaml"), nil, newBackends())
	if err != nil {
		t.Fatal(err)
	}
	file.configFile, file.configGiven = "", ""
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
	for k := range allDefaults() {
		if !keys[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("keys missing from configs/gatebridge.yaml: %v", missing)
	}
	for k := range keys {
		if _, ok := allDefaults()[k]; !ok {
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
		{"sandbox:\n  docker:\n    pull: always\n", "", `sandbox.docker.pull: unknown policy "always"`},
		{"sandbox:\n  docker:\n    pull_timeout: -1s\n", "", "sandbox.docker.pull_timeout: must not be negative"},
		{"sandbox:\n  pool:\n    size: -1\n", "", "sandbox.pool.size: must not be negative"},
		{"sandbox:\n  pool:\n    max_total: -2\n", "", "sandbox.pool.max_total: must not be negative"},
		{"sandbox:\n  pool:\n    idle: -1m\n", "", "sandbox.pool.idle: must not be negative"},
		{"sandbox:\n  pool:\n    sise: 2\n", "", "sandbox.pool.sise: unknown key"},
		{"sandbox:\n  docker:\n    images: [UBUNTU]\n", "", `sandbox.docker.images: "UBUNTU" is not an image reference`},
		{"sandbox:\n  docker:\n    images: [\"ubuntu:24.04:*\"]\n", "", `sandbox.docker.images: "ubuntu:24.04:*"`},
		{"gates:\n  commands:\n    - name: x\n      command: [true]\n      colour: red\n", "", "colour"},
		{"mcp:\n  servers:\n    x:\n      url: http://127.0.0.1:1/\n      max_tools: -1\n", "", "mcp.servers.x.max_tools: negative"},
		{"mcp:\n  servers:\n    x:\n      url: http://127.0.0.1:1/\n      max_tools: 2\n      tools: [a, b, c, a]\n", "", "mcp.servers.x.tools: 3 tools listed, more than max_tools (2)"},
	} {
		dir := t.TempDir()
		p := filepath.Join(dir, "gatebridge.yaml")
		os.WriteFile(p, []byte(tc.yaml), 0o644)
		if tc.env != "" {
			k, v, _ := strings.Cut(tc.env, "=")
			t.Setenv(k, v)
		}
		_, _, err := loadConfig(p, nil, newBackends())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("yaml %q env %q: err %v, want %q", tc.yaml, tc.env, err, tc.want)
		}
		if tc.env != "" {
			k, _, _ := strings.Cut(tc.env, "=")
			os.Unsetenv(k)
		}
	}
}

// allDefaults is every key's default: internal/config's and the backends'.
func allDefaults() map[string]any {
	out := maps.Clone(config.Defaults)
	maps.Copy(out, backendDefaults)
	return out
}
