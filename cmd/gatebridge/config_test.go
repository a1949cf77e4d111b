package main

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/sandbox/docker"

	"gopkg.in/yaml.v3"
)

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
	if _, _, err := loadConfig(p, nil, newBackends()); err != nil {
		t.Fatalf("own config refused: %v", err)
	}
	if err := os.Chown(p, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	_, _, err := loadConfig(p, nil, newBackends())
	if err == nil || !strings.Contains(err.Error(), "owned by uid 4242, not you") {
		t.Errorf("config owned by uid 4242: %v", err)
	}
	os.Chown(p, 0, 0)
	os.Chown(dir, 4242, 4242)
	_, _, err = loadConfig(p, nil, newBackends())
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
	load := func(p string) error { _, _, err := loadConfig(p, nil, newBackends()); return err }

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
		_, _, err := loadConfig(p, nil, newBackends())
		if err == nil || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "write 30s") {
			t.Errorf("%s: 30: %v", key, err)
		}
		if named {
			continue // no environment variable names a section by name
		}
		// From the environment too.
		t.Setenv("GATEBRIDGE_"+strings.ToUpper(strings.ReplaceAll(key, ".", "_")), "30")
		_, _, err = loadConfig("", nil, newBackends())
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
	if cfg, _, err := loadConfig(p, nil, newBackends()); err != nil || cfg.Sandbox.Timeout != 0 {
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
	cfg, _, err := loadConfig(p, nil, newBackends())
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Gates.Commands[0].Options
	if len(got) != 2 || got[0] != (OptionConfig{Name: "--oneline"}) || got[1] != (OptionConfig{Name: "-n", Value: "[0-9]+"}) {
		t.Errorf("options %+v", got)
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
	if got := limitsOf(cfg); got != bridge.DefaultLimits() {
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
