package mcptools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/gates/secrets"
	"github.com/gatebridge/gatebridge/internal/hint"
)

// Register adds the "mcp" kind ([KindMCP]) to kinds. Its settings are a
// [Server]; its New starts or connects to the server (see [Connect]) and
// makes a gate of each tool. A stdio server's program must not be where
// the sandbox can write ([gates.Env.Untrusted], as a command gate's); its
// tool list is cached in [DefaultCacheDir] unless [Server.CacheDir] is set.
// Tools refused, and tools whose gate name is taken
// ([gates.SkipOnClash]), are left out with a warning ([gates.Env.Warn]).
// A stdio server runs in a sandbox of its own ([gates.Env.Isolation])
// unless its Isolate says Host: where none can run, it is refused.
// Errors naming a setting are [*gates.SettingError]s: "command", "tools",
// "max_tools", "isolate…".
func Register(kinds *gates.KindRegistry) error {
	return kinds.Register(gates.KindOf(KindMCP, "the tools of an MCP server (stdio or streamable HTTP), one gate each",
		gates.SkipOnClash, newKindGates))
}

func newKindGates(ctx context.Context, s Server, env gates.Env) ([]gates.Gate, error) {
	if err := secretSettings(ctx, &s, env); err != nil {
		return nil, err
	}
	for _, n := range s.EnvPassthrough {
		if !ValidEnvName(n) {
			return nil, &gates.SettingError{Field: "env_passthrough", Err: fmt.Errorf("%q is not a variable name", n),
				Help: func(string) string { return "list variable names, exactly (letters, digits and _; no = or *)" }}
		}
	}
	if len(s.EnvPassthrough) > 0 && len(s.Command) == 0 {
		return nil, &gates.SettingError{Field: "env_passthrough", Err: errors.New("env_passthrough applies to a stdio server (command), not to a url"),
			Help: func(key string) string { return "drop " + key + ".env_passthrough" }}
	}
	if len(s.Command) > 0 {
		prog, err := exec.LookPath(s.Command[0])
		if err == nil {
			prog, err = gates.TrustedCommand(prog, env.Untrusted)
		}
		if err != nil {
			return nil, &gates.SettingError{Field: "command", Err: err, Help: func(string) string {
				return "install the MCP server where only root or you can write, outside the workspace, the writable root and the session directories"
			}}
		}
		// Start the program that was checked, not whatever PATH finds later.
		s.Command = append([]string{prog}, s.Command[1:]...)
		if s.Isolator == nil {
			// In a sandbox of its own unless isolate.host says otherwise.
			if s.Isolator, s.Isolate, _, err = env.IsolationResolved(ctx, s.Isolate); err != nil {
				return nil, err
			}
		}
		if s.Isolator == nil && s.Dir == "" && cwdUntrusted(env.Untrusted) {
			// On the host, not among the sandbox's files: npx runs a
			// node_modules/.bin program of the working directory, npm
			// reads its .npmrc, python -m its modules.
			s.Dir = "/"
		}
	} else if s.Isolate.Host || s.Isolate.Network || len(s.Isolate.Read) > 0 || len(s.Isolate.Write) > 0 {
		return nil, &gates.SettingError{Field: "isolate", Err: errors.New("isolate applies to a stdio server (command), not to a url"),
			Help: func(key string) string { return "drop " + key + ".isolate" }}
	}
	if s.CacheDir == "" {
		s.CacheDir = DefaultCacheDir(env.Untrusted)
	}
	gs, refused, err := Connect(ctx, s)
	if err != nil {
		return nil, kindError(err)
	}
	if env.Warn != nil {
		for _, r := range refused {
			env.Warn(r.String())
		}
	}
	return gs, nil
}

// secretSettings refuses a secret reference where none is taken (the
// command, the url), reads every secret env and headers reference (an
// error naming the setting when one cannot be read), and sets s.Expand,
// which expands them when the server starts and with each request.
func secretSettings(ctx context.Context, s *Server, env gates.Env) error {
	for i, a := range s.Command {
		if secrets.Mentions(a) {
			return &gates.SettingError{Field: "command", Err: fmt.Errorf("element %d references a secret: only env and headers take ${secret:NAME}", i),
				Help: func(key string) string { return "pass the secret in " + key + ".env" }}
		}
	}
	if secrets.Mentions(s.URL) {
		return &gates.SettingError{Field: "url", Err: errors.New("the url references a secret: only env and headers take ${secret:NAME}"),
			Help: func(key string) string { return "pass the secret in a header (" + key + ".headers)" }}
	}
	headers := make([]string, 0, len(s.Headers))
	for _, v := range s.Headers {
		headers = append(headers, v)
	}
	for field, list := range map[string][]string{"env": s.Env, "headers": headers} {
		if err := env.Secrets.Resolve(ctx, list, env.Untrusted); err != nil {
			h := hint.Of(err)
			return &gates.SettingError{Field: field, Err: err, Help: func(string) string { return h }}
		}
	}
	st, untrusted := env.Secrets, env.Untrusted
	s.Expand = func(ctx context.Context, v string) (string, error) { return st.Expand(ctx, v, untrusted) }
	s.Redactor = st.Redactor()
	return nil
}

// kindError names the setting err is about, with a hint.
func kindError(err error) error {
	var se *SettingError
	switch {
	case errors.Is(err, ErrNoSuchTool):
		return &gates.SettingError{Field: "tools", Err: err, Help: func(string) string {
			return "list only tools the server has (`gatebridge gates` without the list shows them)"
		}}
	case errors.As(err, &se) && se.Field == "max_tools":
		return &gates.SettingError{Field: se.Field, Err: err, Help: func(key string) string {
			return fmt.Sprintf("name the tools to use in %s.tools, or raise %s.max_tools (each tool is a wrapper in every session)", key, key)
		}}
	case errors.As(err, &se):
		return &gates.SettingError{Field: se.Field, Err: err, Help: func(key string) string {
			return fmt.Sprintf("name fewer tools in %s.tools", key)
		}}
	}
	return &gates.SettingError{Err: err, Help: func(string) string { return "check that the server starts (command) or answers (url)" }}
}

// DefaultCacheDir is where the mcp kind keeps stdio servers' tool lists,
// so that a server starts at its first call rather than with every run:
// $XDG_CACHE_HOME/gatebridge/mcp. It is "" (every server starts at once)
// when there is no cache dir, or it lies in one of untrusted, where the
// sandbox writes: a planted tool list would not change what runs, but
// would change what the gates say and accept.
func DefaultCacheDir(untrusted []string) string {
	base, err := os.UserCacheDir()
	if err != nil || !filepath.IsAbs(base) {
		return ""
	}
	dir := filepath.Join(base, "gatebridge", "mcp")
	real := dir
	if r, err := filepath.EvalSymlinks(base); err == nil {
		real = filepath.Join(r, "gatebridge", "mcp")
	}
	if gates.UntrustedDir(untrusted, real, dir) != "" {
		return ""
	}
	return dir
}

// cwdUntrusted reports whether gatebridge's working directory lies in
// one of untrusted (or cannot be told).
func cwdUntrusted(untrusted []string) bool {
	wd, err := os.Getwd()
	if err != nil {
		return true
	}
	real, err := filepath.EvalSymlinks(wd)
	if err != nil {
		real = wd
	}
	return gates.UntrustedDir(untrusted, real, filepath.Clean(wd)) != ""
}
