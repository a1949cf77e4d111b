// Package config is gatebridge's configuration: the sections and their
// keys, the defaults, decoding (defaults < gatebridge.yaml < GATEBRIDGE_*
// env < flags), validation, the config file's trust and place checks and
// the secrets section. cmd/gatebridge binds its flags (FlagKeys) and
// maps a Config to each package's options.
package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/bridge/approval"
	"github.com/gatebridge/gatebridge/bridge/cmdpolicy"
	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/bridge/mcpserver"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/internal/configview"
	"github.com/gatebridge/gatebridge/internal/suggest"
	"github.com/gatebridge/gatebridge/sandbox"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// Config is every setting of gatebridge, decoded once from defaults <
// gatebridge.yaml < GATEBRIDGE_* env < flags. configs/gatebridge.yaml
// documents each key with its default (a test keeps the two in sync).
type Config struct {
	Sandbox SandboxConfig `mapstructure:"sandbox"`
	Bridge  BridgeConfig  `mapstructure:"bridge"`
	Gates   GatesConfig   `mapstructure:"gates"`
	Audit   AuditConfig   `mapstructure:"audit"`
	MCP     MCPConfig     `mapstructure:"mcp"`
	Policy  PolicyConfig  `mapstructure:"policy"`
	// Approvals: how long a question waits, how many wait, where grants
	// live (docs/approvals.md).
	Approvals ApprovalsConfig `mapstructure:"approvals"`

	// Secrets, by name: credentials gates use (secrets.go).
	Secrets map[string]SecretConfig `mapstructure:"secrets"`
}

type SandboxConfig struct {
	Backend           string        `mapstructure:"backend"`
	Timeout           time.Duration `mapstructure:"timeout"`
	KillGrace         time.Duration `mapstructure:"kill_grace"`
	MaxOutput         int64         `mapstructure:"max_output"`
	MaxCommandBytes   int64         `mapstructure:"max_command_bytes"`
	MaxCommands       int           `mapstructure:"max_commands"`
	Workspace         string        `mapstructure:"workspace"`
	WritableWorkspace bool          `mapstructure:"writable_workspace"`
	Limits            SandboxLimits `mapstructure:"limits"`
	ProtectedPaths    []string      `mapstructure:"protected_paths"`
	AllowUnsandboxed  bool          `mapstructure:"allow_unsandboxed"`
	AllowRoot         bool          `mapstructure:"allow_root"`
	UID               int           `mapstructure:"uid"`
	GID               int           `mapstructure:"gid"`
	GateUID           int           `mapstructure:"gate_uid"`
	GateGID           int           `mapstructure:"gate_gid"`
	Docker            DockerConfig  `mapstructure:"docker"`
	Bwrap             BwrapConfig   `mapstructure:"bwrap"`
	Attach            AttachConfig  `mapstructure:"attach"`
	Pool              PoolConfig    `mapstructure:"pool"`
}

// PoolConfig is serve's warm pool (control.PoolOptions).
type PoolConfig struct {
	Size     int           `mapstructure:"size"`
	MaxTotal int           `mapstructure:"max_total"`
	Idle     time.Duration `mapstructure:"idle"`
}

// AttachConfig is what the operator declares about a sandbox that
// `serve --attach` does not start: its mounts are the pod's, which
// gatebridge cannot see.
type AttachConfig struct {
	// ReadOnlyPaths are the paths the sandbox's container mounts
	// read-only, absolute as it sees them; with a writable workspace they
	// must cover sandbox.protected_paths under the workspace opened.
	ReadOnlyPaths []string `mapstructure:"read_only_paths"`
}

// SandboxLimits bound the sandboxed command under bwrap and docker.
type SandboxLimits struct {
	Memory  int64   `mapstructure:"memory"`
	CPUs    float64 `mapstructure:"cpus"`
	Pids    int64   `mapstructure:"pids"`
	TmpSize int64   `mapstructure:"tmp_size"`
}

type DockerConfig struct {
	Image              string        `mapstructure:"image"`
	Images             []string      `mapstructure:"images"`
	Pull               string        `mapstructure:"pull"`
	PullTimeout        time.Duration `mapstructure:"pull_timeout"`
	Runtime            string        `mapstructure:"runtime"`
	User               string        `mapstructure:"user"`
	Network            string        `mapstructure:"network"`
	WritableRootfs     bool          `mapstructure:"writable_rootfs"`
	AllowNewPrivileges bool          `mapstructure:"allow_new_privileges"`
	CapAdd             []string      `mapstructure:"cap_add"`
	NoInit             bool          `mapstructure:"no_init"`
	Reuse              string        `mapstructure:"reuse"`
	SessionsRoot       string        `mapstructure:"sessions_root"`
}

type BwrapConfig struct {
	Path     string   `mapstructure:"path"`
	ReadOnly []string `mapstructure:"read_only"`
}

type BridgeConfig struct {
	Watch          string        `mapstructure:"watch"`
	PollInterval   time.Duration `mapstructure:"poll_interval"`
	RescanInterval time.Duration `mapstructure:"rescan_interval"`
	SessionDir     string        `mapstructure:"session_dir"`
	KeepSession    bool          `mapstructure:"keep_session"`
	SubmitLines    bool          `mapstructure:"submit_lines"`
	Limits         LimitsConfig  `mapstructure:"limits"`
}

type LimitsConfig struct {
	MaxCalls        int           `mapstructure:"max_calls"`
	MaxConcurrent   int           `mapstructure:"max_concurrent"`
	MaxArgs         int           `mapstructure:"max_args"`
	MaxArgBytes     int64         `mapstructure:"max_arg_bytes"`
	MaxStdinBytes   int64         `mapstructure:"max_stdin_bytes"`
	MaxOutputBytes  int64         `mapstructure:"max_output_bytes"`
	GateTimeout     time.Duration `mapstructure:"gate_timeout"`
	MaxScanEntries  int           `mapstructure:"max_scan_entries"`
	MaxSessionBytes int64         `mapstructure:"max_session_bytes"`
	MaxRecords      int           `mapstructure:"max_records"`
	MaxRecordBytes  int           `mapstructure:"max_record_bytes"`
}

type GatesConfig struct {
	Builtins           bool            `mapstructure:"builtins"`
	Root               string          `mapstructure:"root"`
	WritableRoot       string          `mapstructure:"writable_root"`
	MaxFileBytes       int64           `mapstructure:"max_file_bytes"`
	MaxSearchMatches   int             `mapstructure:"max_search_matches"`
	MaxSearchFiles     int             `mapstructure:"max_search_files"`
	MaxSearchFileBytes int64           `mapstructure:"max_search_file_bytes"`
	Commands           []CommandConfig `mapstructure:"commands"`

	// HTTP are the http gates (secrets.go: HTTPGateConfig).
	HTTP []HTTPGateConfig `mapstructure:"http"`
}

type CommandConfig struct {
	Name           string         `mapstructure:"name"`
	Summary        string         `mapstructure:"summary"`
	Command        []string       `mapstructure:"command"`
	Args           []ArgConfig    `mapstructure:"args"`
	Options        []OptionConfig `mapstructure:"options"`
	EndOfOptions   string         `mapstructure:"end_of_options"`
	AllowArgs      []string       `mapstructure:"allow_args"`
	AllowPattern   string         `mapstructure:"allow_pattern"`
	Home           string         `mapstructure:"home"`
	Dir            string         `mapstructure:"dir"`
	Timeout        time.Duration  `mapstructure:"timeout"`
	MaxOutputBytes int64          `mapstructure:"max_output_bytes"`
	Env            []string       `mapstructure:"env"`
	Stdin          bool           `mapstructure:"stdin"`
	// Approval is "never" (default), "ask" (serve asks its client, run
	// and sandbox exec the person at the terminal) or "deny"
	// (docs/approvals.md).
	Approval string        `mapstructure:"approval"`
	Isolate  IsolateConfig `mapstructure:"isolate"`
}

// IsolateConfig is the sandbox of its own a command gate's program or a
// stdio MCP server runs in (isolate: always a map): what it reaches
// besides the system directories, its program file and its dir, or host:
// true to run it on the host as before.
type IsolateConfig struct {
	Network bool     `mapstructure:"network"`
	Read    []string `mapstructure:"read"`
	Write   []string `mapstructure:"write"`
	Host    bool     `mapstructure:"host"`
}

// Spec is c as package gates takes it.
func (c IsolateConfig) Spec() gates.IsolateSpec {
	return gates.IsolateSpec{Network: c.Network, Read: c.Read, Write: c.Write, Host: c.Host}
}

// MCPConfig is the mcp section: what `gatebridge mcp` (the MCP server
// gatebridge serves) may hold, and the MCP servers whose tools become
// gates.
type MCPConfig struct {
	Sessions MCPSessionsConfig          `mapstructure:"sessions"`
	Servers  map[string]MCPServerConfig `mapstructure:"servers"`
}

// MCPSessionsConfig bounds what the sessions of `gatebridge mcp` hold
// (mcp.sessions): sandboxes under --http, and each session's background
// processes. 0 means the default.
type MCPSessionsConfig struct {
	MaxSandboxes       int           `mapstructure:"max_sandboxes"`
	IdleTimeout        time.Duration `mapstructure:"idle_timeout"`
	MaxBackground      int           `mapstructure:"max_background"`
	MaxBackgroundBytes int64         `mapstructure:"max_background_bytes"`
}

// MCPServerConfig is one MCP server (mcp.servers.NAME).
type MCPServerConfig struct {
	Command []string          `mapstructure:"command"`
	URL     string            `mapstructure:"url"`
	Headers map[string]string `mapstructure:"headers"`
	Env     []string          `mapstructure:"env"`
	// EnvPassthrough: variables of gatebridge's environment a stdio
	// server gets besides mcptools.BaseEnv's.
	EnvPassthrough []string      `mapstructure:"env_passthrough"`
	Tools          []string      `mapstructure:"tools"`
	MaxTools       int           `mapstructure:"max_tools"` // 0: the mcp kind's default
	Prefix         *string       `mapstructure:"prefix"`
	Timeout        time.Duration `mapstructure:"timeout"`
	Approval       string        `mapstructure:"approval"`
	// ToolApproval sets approval for single tools, by the tool's name.
	ToolApproval map[string]string `mapstructure:"tool_approval"`
	Isolate      IsolateConfig     `mapstructure:"isolate"`
}

// PolicyConfig is the policy section. Commands is nil when the config
// has no policy.commands: then nothing is checked.
type PolicyConfig struct {
	Commands *cmdpolicy.Config `mapstructure:"commands"`
}

// ApprovalsConfig is the approvals section.
type ApprovalsConfig struct {
	Timeout    time.Duration `mapstructure:"timeout"`
	MaxPending int           `mapstructure:"max_pending"`
	GrantsFile string        `mapstructure:"grants_file"`
}

type ArgConfig struct {
	Name     string `mapstructure:"name"`
	Pattern  string `mapstructure:"pattern"`
	Optional bool   `mapstructure:"optional"`
	Variadic bool   `mapstructure:"variadic"`
	Max      int    `mapstructure:"max"`
}

type OptionConfig struct {
	Name  string `mapstructure:"name"`
	Value string `mapstructure:"value"`
}

type AuditConfig struct {
	Path     string `mapstructure:"path"`
	MaxBytes int64  `mapstructure:"max_bytes"`
	MaxFiles int    `mapstructure:"max_files"`
}

// Defaults lists every scalar key with its default but those whose
// default a backend package holds (Registered.Defaults); limits come from the
// library (bridge.DefaultLimits, gates.Default*), so the two cannot drift. Unmarshal ignores env
// vars for keys viper does not know, so every key must be here.
var Defaults = map[string]any{
	"sandbox.backend":                     AutoBackend,
	"sandbox.timeout":                     "10m",
	"sandbox.kill_grace":                  "2s",
	"sandbox.max_output":                  1 << 20,
	"sandbox.max_command_bytes":           control.DefaultMaxCommandBytes,
	"sandbox.max_commands":                0,
	"sandbox.workspace":                   "",
	"sandbox.writable_workspace":          false,
	"sandbox.docker.image":                "gatebridge-test:latest",
	"sandbox.docker.images":               []string{},
	"sandbox.docker.user":                 "",
	"sandbox.docker.runtime":              "",
	"sandbox.limits.memory":               512 << 20,
	"sandbox.limits.cpus":                 1.0,
	"sandbox.limits.pids":                 256,
	"sandbox.limits.tmp_size":             64 << 20,
	"sandbox.protected_paths":             []string{".git"},
	"sandbox.allow_unsandboxed":           false,
	"sandbox.allow_root":                  false,
	"sandbox.uid":                         65534,
	"sandbox.gid":                         65534,
	"sandbox.docker.network":              "none",
	"sandbox.docker.writable_rootfs":      false,
	"sandbox.docker.allow_new_privileges": false,
	"sandbox.docker.cap_add":              []string{},
	"sandbox.docker.no_init":              false,
	"sandbox.docker.reuse":                "",
	"sandbox.docker.sessions_root":        "",
	"sandbox.bwrap.path":                  "",
	"sandbox.bwrap.read_only":             []string{},
	"sandbox.attach.read_only_paths":      []string{},
	"sandbox.pool.size":                   0,
	"sandbox.pool.max_total":              0,
	"sandbox.pool.idle":                   control.DefaultPoolIdle.String(),
	"bridge.watch":                        "auto",
	"bridge.poll_interval":                "10ms",
	"bridge.rescan_interval":              "1s",
	"bridge.session_dir":                  "",
	"bridge.keep_session":                 false,
	"bridge.submit_lines":                 true,
	"bridge.limits.max_calls":             bridge.DefaultLimits().MaxCalls,
	"bridge.limits.max_concurrent":        bridge.DefaultLimits().MaxConcurrent,
	"bridge.limits.max_args":              bridge.DefaultLimits().MaxArgs,
	"bridge.limits.max_arg_bytes":         bridge.DefaultLimits().MaxArgBytes,
	"bridge.limits.max_stdin_bytes":       bridge.DefaultLimits().MaxStdinBytes,
	"bridge.limits.max_output_bytes":      bridge.DefaultLimits().MaxOutputBytes,
	"bridge.limits.gate_timeout":          bridge.DefaultLimits().GateTimeout.String(),
	"bridge.limits.max_scan_entries":      bridge.DefaultLimits().MaxScanEntries,
	"bridge.limits.max_session_bytes":     bridge.DefaultLimits().MaxSessionBytes,
	"audit.max_bytes":                     64 << 20,
	"audit.max_files":                     3,
	"bridge.limits.max_records":           bridge.DefaultLimits().MaxRecords,
	"bridge.limits.max_record_bytes":      bridge.DefaultLimits().MaxRecordBytes,
	"gates.builtins":                      true,
	"gates.root":                          "",
	"gates.writable_root":                 "",
	"gates.max_file_bytes":                gates.DefaultMaxFileBytes,
	"gates.max_search_matches":            gates.DefaultMaxSearchMatches,
	"gates.max_search_files":              gates.DefaultMaxSearchFiles,
	"gates.max_search_file_bytes":         gates.DefaultMaxSearchFileBytes,
	"gates.commands":                      []any{},
	"gates.http":                          []any{},
	"audit.path":                          "",
	"approvals.timeout":                   approval.DefaultTimeout.String(),
	"approvals.max_pending":               approval.DefaultMaxPending,
	"approvals.grants_file":               "",
	"mcp.sessions.max_sandboxes":          mcpserver.DefaultMaxSandboxes,
	"mcp.sessions.idle_timeout":           mcpserver.DefaultIdleTimeout.String(),
	"mcp.sessions.max_background":         mcpserver.DefaultMaxBackground,
	"mcp.sessions.max_background_bytes":   mcpserver.DefaultMaxBackgroundBytes,
}

// Error is a bad configuration; it names the key and says how to fix it.
type Error struct {
	Key  string
	Msg  string
	Help string // how to fix it ([Error.Hint])
}

// Hint says how to fix it.
func (e *Error) Hint() string { return e.Help }

func (e *Error) Error() string {
	if e.Key == "" {
		return "config: " + e.Msg
	}
	return fmt.Sprintf("config: %s: %s", e.Key, e.Msg)
}

// FlagKeys maps command-line flags to config keys (cmd/gatebridge binds
// the flags of its commands that it finds here).
var FlagKeys = map[string]string{
	"sandbox":            "sandbox.backend",
	"timeout":            "sandbox.timeout",
	"workspace":          "sandbox.workspace",
	"writable-workspace": "sandbox.writable_workspace",
	"max-output":         "sandbox.max_output",
	"image":              "sandbox.docker.image",
	"runtime":            "sandbox.docker.runtime",
	"reuse":              "sandbox.docker.reuse",
	"sessions-root":      "sandbox.docker.sessions_root",
	"keep-session":       "bridge.keep_session",
	"watch":              "bridge.watch",
	"pool":               "sandbox.pool.size",
}

// Loaded is a config as Load read it: the file's path as named (Used,
// "" when none), resolved (Real), and its bytes (Data, for what viper
// loses: a key's case).
type Loaded struct {
	*Config
	Used, Real string
	Data       []byte
}

// Load reads the config file (path, $GATEBRIDGE_CONFIG, or
// $XDG_CONFIG_HOME/gatebridge/gatebridge.yaml, else
// ~/.config/gatebridge/gatebridge.yaml), the env and the flags (those of
// FlagKeys found in flags), decodes and validates it. Never the current
// directory or the workspace: the sandbox can write those, and a config
// defines host commands. A file another user could have written is
// refused (ReadTrusted); the caller checks its place (CheckPlace) once it
// has compiled what it needs. backends are the sandbox backends
// sandbox.backend may name, their defaults and checks. The path used is returned with an error too.
func Load(path string, flags *pflag.FlagSet, backends Registered) (*Loaded, string, error) {
	v := viper.New()
	for k, d := range Defaults {
		v.SetDefault(k, d)
	}
	for k, d := range backends.Defaults {
		v.SetDefault(k, d)
	}
	v.SetEnvPrefix("GATEBRIDGE")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	v.SetConfigType("yaml")
	used, real := "", ""
	var data []byte // the file, for what viper loses (a key's case)
	if path == "" {
		path = os.Getenv("GATEBRIDGE_CONFIG")
	}
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return nil, "", &Error{Msg: fmt.Sprintf("cannot read config file %s: %v", path, errors.Unwrap(err)),
				Help: "pass an existing file to --config, or drop the flag to use the defaults"}
		}
		used = path
	} else {
		for _, p := range Candidates() {
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
				used = p
				break
			}
		}
	}
	if used != "" {
		var err error
		if data, real, err = ReadTrusted(used); err != nil {
			return nil, used, err
		}
		if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
			return nil, used, &Error{Msg: fmt.Sprintf("%s: %v", used, err), Help: "the file must be YAML; `gatebridge config example` prints an annotated one"}
		}
		if err := checkUnknownKeys(v.AllSettings(), ""); err != nil {
			err.Msg += " (in " + used + ")"
			return nil, used, err
		}
	}
	if flags != nil {
		for flag, key := range FlagKeys {
			if f := flags.Lookup(flag); f != nil {
				if err := v.BindPFlag(key, f); err != nil {
					return nil, used, err
				}
			}
		}
	}
	var cfg Config
	err := v.UnmarshalExact(&cfg, func(dc *mapstructure.DecoderConfig) {
		dc.DecodeHook = mapstructure.ComposeDecodeHookFunc(
			numberDurationHook,
			optionShorthandHook,
			mapstructure.StringToTimeDurationHookFunc(),
			mapstructure.StringToSliceHookFunc(","),
		)
	})
	if err != nil {
		return nil, used, decodeError(err, v)
	}
	if err := cfg.Validate(backends); err != nil {
		return nil, used, err
	}
	return &Loaded{Config: &cfg, Used: used, Real: real, Data: data}, used, nil
}

// Candidates are where a config file is looked for when none is named.
func Candidates() []string {
	var out []string
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" {
		out = append(out, filepath.Join(x, "gatebridge", "gatebridge.yaml"))
	} else if h, err := os.UserHomeDir(); err == nil {
		out = append(out, filepath.Join(h, ".config", "gatebridge", "gatebridge.yaml"))
	}
	return out
}

// checkUnknownKeys compares the file's keys with the Config struct, so a
// typo is an error that names the key instead of a silently ignored line.
func checkUnknownKeys(m map[string]any, prefix string) *Error {
	known := knownKeys(reflect.TypeOf(Config{}), "")
	var walk func(m map[string]any, prefix, pattern string) *Error
	walk = func(m map[string]any, prefix, pattern string) *Error {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			full, pat := prefix+k, pattern+k
			kind, ok := known[pat]
			if !ok {
				return &Error{Key: full, Msg: "unknown key", Help: unknownKeyHint(known, pattern, prefix, k)}
			}
			if _, named := known[pat+".*"]; kind == reflect.Map && named {
				sub, isMap := m[k].(map[string]any)
				if !isMap {
					return &Error{Key: full, Msg: fmt.Sprintf("bad value %q: want sections by name", fmt.Sprint(m[k])),
						Help: "`gatebridge config example` shows the keys under " + full}
				}
				for _, name := range SortedKeys(sub) {
					entry, isMap := sub[name].(map[string]any)
					if !isMap {
						return &Error{Key: full + "." + name, Msg: fmt.Sprintf("bad value %q: want a section of keys", fmt.Sprint(sub[name])),
							Help: "`gatebridge config example` shows the keys under " + full}
					}
					if err := walk(entry, full+"."+name+".", pat+".*."); err != nil {
						return err
					}
				}
				continue
			}
			if kind == reflect.Struct {
				sub, isMap := m[k].(map[string]any)
				if !isMap {
					// viper would take the defaults under it and ignore this value.
					return &Error{Key: full, Msg: fmt.Sprintf("bad value %q: want a section of keys", fmt.Sprint(m[k])),
						Help: "`gatebridge config example` shows the keys under " + full}
				}
				if err := walk(sub, full+".", pat+"."); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(m, prefix, prefix)
}

// unknownKeyHint suggests the keys nearest to the unknown key k of the
// section pattern ("mcp.servers.*."), written prefix in the file.
func unknownKeyHint(known map[string]reflect.Kind, pattern, prefix, k string) string {
	keys := slices.DeleteFunc(slices.Collect(maps.Keys(known)), func(k string) bool { return strings.HasSuffix(k, ".*") })
	m := suggest.Key(keys, pattern, k)
	for i := range m {
		if rest, ok := strings.CutPrefix(m[i], pattern); ok {
			m[i] = prefix + rest
		}
		m[i] = strings.ReplaceAll(m[i], ".*.", ".NAME.")
	}
	return strings.TrimSpace(suggest.Phrase(m) + " `gatebridge config example` shows every key")
}

func knownKeys(t reflect.Type, prefix string) map[string]reflect.Kind {
	out := map[string]reflect.Kind{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("mapstructure")
		if tag == "" {
			continue
		}
		key := prefix + tag
		ft := f.Type
		if ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct {
			ft = ft.Elem() // an optional section (policy.commands)
		}
		out[key] = ft.Kind()
		if ft.Kind() == reflect.Struct && ft != reflect.TypeOf(time.Duration(0)) {
			for k, v := range knownKeys(ft, key+".") {
				out[k] = v
			}
		}
		// A map of sections by name (mcp.servers.NAME): its keys are
		// "KEY.*.SUBKEY".
		if f.Type.Kind() == reflect.Map && f.Type.Elem().Kind() == reflect.Struct {
			out[key+".*"] = reflect.Struct
			for k, v := range knownKeys(f.Type.Elem(), key+".*.") {
				out[k] = v
			}
		}
	}
	return out
}

// numberDurationHook refuses a duration written as a number: YAML's
// `timeout: 30` would otherwise be 30 nanoseconds and kill the command at
// once. The same bare number from the environment gets the same message.
// 0 needs no unit.
// optionShorthandHook lets a command gate's flag be written as a plain
// string (`options: [--oneline, {name: -n, value: "[0-9]+"}]`).
func optionShorthandHook(from, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeOf(OptionConfig{}) || from.Kind() != reflect.String {
		return data, nil
	}
	return map[string]any{"name": data}, nil
}

func numberDurationHook(from, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeOf(time.Duration(0)) {
		return data, nil
	}
	switch from.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		if reflect.ValueOf(data).IsZero() {
			return time.Duration(0), nil
		}
		return nil, fmt.Errorf("a duration needs a unit: write %vs (or 500ms, 10m), not the bare number %v", data, data)
	case reflect.String:
		s := strings.TrimSpace(reflect.ValueOf(data).String())
		if f, err := strconv.ParseFloat(s, 64); err == nil && f != 0 {
			return nil, fmt.Errorf("a duration needs a unit: write %ss (or 500ms, 10m), not the bare number %s", s, s)
		}
	}
	return data, nil
}

var mapEntry = regexp.MustCompile(`\[([^\]0-9][^\]]*)\]`)

func decodeError(err error, v *viper.Viper) error {
	msg := err.Error()
	// mapstructure: "decoding failed due to the following error(s):\n\n'sandbox.timeout' time: invalid duration \"x\""
	lines := strings.Split(msg, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "'") {
			if end := strings.Index(l[1:], "'"); end > 0 {
				// mapstructure names a map entry key[name]: the config's
				// key is key.name (list indexes stay [0]).
				key := mapEntry.ReplaceAllString(l[1:end+1], ".$1")
				msg := "bad value"
				if val := v.Get(key); val != nil {
					msg = fmt.Sprintf("bad value %q", fmt.Sprint(val))
				}
				help := "`gatebridge config example` shows the type and default of " + key
				if _, bad, ok := strings.Cut(l, "has invalid keys: "); ok { // in a list of sections (gates.commands)
					near := configview.NearestKeys(reflect.TypeOf(Config{}), key, strings.Split(bad, ", "))
					help = strings.TrimSpace(suggest.Phrase(near) + " `gatebridge config example` shows every key")
				}
				return &Error{Key: key, Msg: msg + ": " + strings.TrimSpace(l[end+2:]), Help: help}
			}
		}
	}
	return &Error{Msg: msg, Help: "`gatebridge config example` shows every key"}
}

// Registered is what the config needs of the packages only
// cmd/gatebridge imports (the concrete backends, the mcp gate kind): the
// names sandbox.backend may take, the defaults of the keys a backend
// package holds, the checks of what only it knows (sandbox.docker.pull,
// sandbox.docker.images), and the mcp kind's default max_tools.
type Registered struct {
	Registry        *sandbox.Registry
	Defaults        map[string]any
	Check           func(*Config) error // errors are *Error
	DefaultMaxTools int
}

// Validate checks values the decoder cannot; sandbox.backend must be
// "auto" or a name in b.Registry.
func (c *Config) Validate(b Registered) error {
	backends := b.Registry
	bad := func(key, msg, hint string) error { return &Error{Key: key, Msg: msg, Help: hint} }
	if _, err := backends.Lookup(c.Sandbox.Backend); err != nil && c.Sandbox.Backend != AutoBackend {
		return bad("sandbox.backend", fmt.Sprintf("unknown backend %q", c.Sandbox.Backend), "use "+BackendChoices(backends))
	}
	switch c.Bridge.Watch {
	case "auto", "events", "poll":
	default:
		return bad("bridge.watch", fmt.Sprintf("unknown mode %q", c.Bridge.Watch), "use auto, events or poll")
	}
	nonNeg := map[string]int64{
		"sandbox.timeout": int64(c.Sandbox.Timeout), "sandbox.kill_grace": int64(c.Sandbox.KillGrace),
		"sandbox.max_output": c.Sandbox.MaxOutput, "bridge.poll_interval": int64(c.Bridge.PollInterval),
		control.MaxCommandBytesKey: c.Sandbox.MaxCommandBytes, control.MaxCommandsKey: int64(c.Sandbox.MaxCommands),
		"bridge.rescan_interval":  int64(c.Bridge.RescanInterval),
		"bridge.limits.max_calls": int64(c.Bridge.Limits.MaxCalls), "bridge.limits.max_concurrent": int64(c.Bridge.Limits.MaxConcurrent),
		"bridge.limits.max_args": int64(c.Bridge.Limits.MaxArgs), "bridge.limits.max_arg_bytes": c.Bridge.Limits.MaxArgBytes,
		"bridge.limits.max_stdin_bytes": c.Bridge.Limits.MaxStdinBytes, "bridge.limits.max_output_bytes": c.Bridge.Limits.MaxOutputBytes,
		"bridge.limits.gate_timeout": int64(c.Bridge.Limits.GateTimeout), "bridge.limits.max_scan_entries": int64(c.Bridge.Limits.MaxScanEntries),
		"bridge.limits.max_session_bytes": c.Bridge.Limits.MaxSessionBytes, "bridge.limits.max_records": int64(c.Bridge.Limits.MaxRecords),
		"bridge.limits.max_record_bytes": int64(c.Bridge.Limits.MaxRecordBytes),
		"audit.max_bytes":                c.Audit.MaxBytes, "audit.max_files": int64(c.Audit.MaxFiles),
		"approvals.timeout": int64(c.Approvals.Timeout), "approvals.max_pending": int64(c.Approvals.MaxPending),
		"gates.max_file_bytes": c.Gates.MaxFileBytes, "gates.max_search_matches": int64(c.Gates.MaxSearchMatches),
		"gates.max_search_files": int64(c.Gates.MaxSearchFiles), "gates.max_search_file_bytes": c.Gates.MaxSearchFileBytes,
		"mcp.sessions.max_sandboxes": int64(c.MCP.Sessions.MaxSandboxes), "mcp.sessions.idle_timeout": int64(c.MCP.Sessions.IdleTimeout),
		"sandbox.pool.size": int64(c.Sandbox.Pool.Size), "sandbox.pool.max_total": int64(c.Sandbox.Pool.MaxTotal), "sandbox.pool.idle": int64(c.Sandbox.Pool.Idle),
		"mcp.sessions.max_background": int64(c.MCP.Sessions.MaxBackground), "mcp.sessions.max_background_bytes": c.MCP.Sessions.MaxBackgroundBytes,
	}
	keys := make([]string, 0, len(nonNeg))
	for k := range nonNeg {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if nonNeg[k] < 0 {
			hint := "0 means the default"
			if k == "sandbox.timeout" {
				hint = "0 means no limit"
			}
			return bad(k, "must not be negative", hint)
		}
	}
	if c.Bridge.Limits.MaxConcurrent > 1024 {
		return bad("bridge.limits.max_concurrent", "must be at most 1024", "")
	}
	if c.Sandbox.Limits.CPUs < 0 {
		return bad("sandbox.limits.cpus", "must not be negative", "0 means no limit")
	}
	if c.Sandbox.Limits.Memory < 0 {
		return bad("sandbox.limits.memory", "must not be negative", "0 means no limit")
	}
	if c.Sandbox.Limits.Pids < 0 {
		return bad("sandbox.limits.pids", "must not be negative", "0 means no limit")
	}
	if c.Sandbox.Limits.TmpSize < 0 {
		return bad("sandbox.limits.tmp_size", "must not be negative", "0 means the default (64 MiB)")
	}
	if b.Check != nil {
		if err := b.Check(c); err != nil {
			return err
		}
	}
	if c.Sandbox.UID < 0 || c.Sandbox.GID < 0 {
		return bad("sandbox.uid", "uid and gid must not be negative", "the default 65534 is nobody")
	}
	if (c.Sandbox.UID == 0 || c.Sandbox.GID == 0) && !c.Sandbox.AllowRoot {
		return bad("sandbox.uid", "0 would run sandboxed commands as host root",
			"pick an unprivileged uid (default 65534), or set sandbox.allow_root: true if you really mean it")
	}
	if c.Sandbox.GateUID < 0 || c.Sandbox.GateGID < 0 {
		return bad("sandbox.gate_uid", "uid and gid must not be negative", fmt.Sprintf("the default %v is a uid of the gates' own (0 means it too)", b.Defaults["sandbox.gate_uid"]))
	}
	for _, p := range c.Sandbox.Attach.ReadOnlyPaths {
		if !filepath.IsAbs(p) {
			return bad("sandbox.attach.read_only_paths", fmt.Sprintf("%q is not an absolute path", p),
				"list the paths the sandbox's container mounts read-only as it sees them, e.g. [/workspace/.git] for the protected .git of a workspace /workspace")
		}
	}
	for i, cmd := range c.Gates.Commands {
		key := fmt.Sprintf("gates.commands[%d]", i)
		if cmd.Name == "" {
			return bad(key+".name", "missing", "every command gate needs a name")
		}
		if len(cmd.Command) == 0 {
			return bad(key+".command", "missing", "give the fixed argv prefix, e.g. [git, log]")
		}
		if err := checkApproval(key+".approval", cmd.Approval); err != nil {
			return err
		}
	}
	for i, h := range c.Gates.HTTP {
		if err := checkApproval(fmt.Sprintf("gates.http[%d].approval", i), h.Approval); err != nil {
			return err
		}
	}
	for _, name := range SortedKeys(c.MCP.Servers) {
		srv, key := c.MCP.Servers[name], "mcp.servers."+name
		if (len(srv.Command) == 0) == (srv.URL == "") {
			return bad(key, "set command (a stdio server) or url (a streamable HTTP one), one of them", "see the mcp example in `gatebridge config example`")
		}
		if srv.Timeout < 0 {
			return bad(key+".timeout", "negative", "a duration such as 60s")
		}
		if srv.MaxTools < 0 {
			return bad(key+".max_tools", "negative", fmt.Sprintf("a number of tools (0: %d)", b.DefaultMaxTools))
		}
		listed := map[string]bool{}
		for _, t := range srv.Tools {
			listed[t] = true
		}
		if max := cmp.Or(srv.MaxTools, b.DefaultMaxTools); len(listed) > max {
			return bad(key+".tools", fmt.Sprintf("%d tools listed, more than max_tools (%d)", len(listed), max), "list fewer, or raise "+key+".max_tools")
		}
		if err := checkApproval(key+".approval", srv.Approval); err != nil {
			return err
		}
		for _, tool := range SortedKeys(srv.ToolApproval) {
			if err := checkApproval(key+".tool_approval."+tool, srv.ToolApproval[tool]); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkApproval checks an approval setting: never (or unset), ask or deny.
func checkApproval(key, v string) error {
	if _, err := approval.ParseSetting(v); err != nil {
		return &Error{Key: key, Msg: err.Error(), Help: "ask: run asks the person at the terminal, serve its client (docs/approvals.md)"}
	}
	return nil
}

// SortedKeys is m's keys, sorted.
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// AutoBackend is the sandbox.backend that picks a registered backend.
const AutoBackend = "auto"

// BackendChoices is the sandbox.backend values, for help texts and hints:
// "auto, local, bwrap or docker".
func BackendChoices(reg *sandbox.Registry) string {
	names := append([]string{AutoBackend}, reg.Names()...)
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
