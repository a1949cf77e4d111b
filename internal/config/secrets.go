package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/gates/httpgate"
	"github.com/gatebridge/gatebridge/gates/secrets"
	"github.com/gatebridge/gatebridge/internal/fspath"
)

// SecretConfig is one secret (secrets.NAME; docs/broker.md): one of env,
// file, command.
type SecretConfig struct {
	Env     string        `mapstructure:"env"`
	File    string        `mapstructure:"file"`
	Command []string      `mapstructure:"command"`
	Refresh time.Duration `mapstructure:"refresh"`
}

// HTTPGateConfig is one http gate (gates.http[i]).
type HTTPGateConfig struct {
	Name             string           `mapstructure:"name"`
	Timeout          time.Duration    `mapstructure:"timeout"`
	MaxResponseBytes int64            `mapstructure:"max_response_bytes"`
	MaxRequestBytes  int64            `mapstructure:"max_request_bytes"`
	Rules            []HTTPRuleConfig `mapstructure:"rules"`
	Approval         string           `mapstructure:"approval"` // never, ask, deny (docs/approvals.md)
}

// HTTPRuleConfig is one rule of an http gate.
type HTTPRuleConfig struct {
	URL          string            `mapstructure:"url"`
	Methods      []string          `mapstructure:"methods"`
	Headers      map[string]string `mapstructure:"headers"`
	AllowPrivate bool              `mapstructure:"allow_private"`
	CAFile       string            `mapstructure:"ca_file"`
}

// Gate is one http gate's settings.
func (c HTTPGateConfig) Gate() httpgate.Config {
	out := httpgate.Config{Name: c.Name, Timeout: c.Timeout, MaxResponseBytes: c.MaxResponseBytes, MaxRequestBytes: c.MaxRequestBytes}
	for _, r := range c.Rules {
		out.Rules = append(out.Rules, httpgate.Rule{URL: r.URL, Methods: r.Methods, Headers: r.Headers, AllowPrivate: r.AllowPrivate, CAFile: r.CAFile})
	}
	return out
}

// LoadSecrets checks the secrets section and makes a store of it (nil
// when there are none), then removes the variables env secrets come from
// from this process: no program gatebridge starts inherits them. raw is
// the config file, where a name's case is still as written (viper
// lower-cases keys).
func (c *Config) LoadSecrets(raw []byte) (*secrets.Store, error) {
	var file struct {
		Secrets map[string]any `yaml:"secrets"`
	}
	if yaml.Unmarshal(raw, &file) == nil {
		for _, name := range SortedKeys(file.Secrets) {
			if !secrets.ValidName(name) {
				return nil, &Error{Key: "secrets." + name, Msg: fmt.Sprintf("%q is not a secret name", name),
					Help: "name secrets with lower-case letters, digits and _, starting with a letter (gh, db_pass)"}
			}
		}
	}
	if len(c.Secrets) == 0 {
		return nil, nil
	}
	srcs := map[string]secrets.Source{}
	for n, s := range c.Secrets {
		srcs[n] = secrets.Source{Env: s.Env, File: s.File, Command: s.Command, Refresh: s.Refresh}
	}
	st, err := secrets.New(srcs, secrets.Options{TrustProgram: gates.TrustedCommand})
	if err != nil {
		return nil, secretError(err)
	}
	st.ScrubEnv()
	// sandbox.bwrap.read_only is bound into every bwrap sandbox and every
	// gate's own: a secret file there is read by the sandboxed command
	// (as gatebridge's uid when it is not root, the file's owner).
	for _, name := range st.Names() {
		src, _ := st.Source(name)
		if src.File == "" {
			continue
		}
		if ro := within(src.File, c.Sandbox.Bwrap.ReadOnly); ro != "" {
			return nil, &Error{Key: "secrets." + name + ".file", Msg: fmt.Sprintf("%s is inside %s, which sandbox.bwrap.read_only binds into every sandbox: a sandboxed command would read it", src.File, ro),
				Help: "keep secret files outside sandbox.bwrap.read_only (e.g. /run/secrets)"}
		}
	}
	return st, nil
}

// within returns the entry of dirs that holds p (both resolved where they
// exist), or "".
func within(p string, dirs []string) string {
	real := func(s string) string {
		s = filepath.Clean(s)
		if r, err := filepath.EvalSymlinks(s); err == nil {
			return r
		}
		if d, err := filepath.EvalSymlinks(filepath.Dir(s)); err == nil {
			return filepath.Join(d, filepath.Base(s))
		}
		return s
	}
	rp := real(p)
	for _, d := range dirs {
		if d != "" && (fspath.Within(rp, real(d)) || fspath.Within(filepath.Clean(p), filepath.Clean(d))) {
			return d
		}
	}
	return ""
}

// secretError names the key of a secret's error.
func secretError(err error) error {
	var se *secrets.Error
	if !errors.As(err, &se) {
		return err
	}
	key := "secrets." + se.Name
	if se.Field != "" {
		key += "." + se.Field
	}
	return &Error{Key: key, Msg: se.Err.Error(), Help: se.Help}
}
