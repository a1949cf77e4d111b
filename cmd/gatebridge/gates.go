package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/gates/mcptools"
	"github.com/gatebridge/gatebridge/internal/fspath"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/docker"
)

// gateDoc is one gate as `gates --format json` prints it: ready to hand to
// a model as a tool description.
type gateDoc struct {
	Name    string        `json:"name"`
	Summary string        `json:"summary"`
	Usage   string        `json:"usage"`
	Params  []gates.Param `json:"params"`
	Stdin   string        `json:"stdin"`
	Kind    string        `json:"kind"` // builtin, command (gates.Kinds)
}

func newGatesCmd(a *app) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "gates",
		Short: "List the gates a sandboxed command can call, with usage",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			reg, kinds, _, err := a.workspaceGates(cmd)
			if err != nil {
				return err
			}
			defer reg.Close()
			specs := reg.Specs()
			out := cmd.OutOrStdout()
			switch format {
			case "json":
				docs := make([]gateDoc, len(specs))
				for i, s := range specs {
					p := s.Params
					if p == nil {
						p = []gates.Param{}
					}
					docs[i] = gateDoc{s.Name, s.Summary, s.Usage, p, s.Stdin.String(), kinds[s.Name]}
				}
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(docs)
			case "json-schema", "openai", "anthropic", "mcp":
				return writeToolSchemas(out, format, reg)
			case "text":
				tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				for _, s := range specs {
					usage := s.Usage
					if usage == "" {
						usage = s.Name
					}
					fmt.Fprintf(tw, "%s\t%s\n", usage, strings.ReplaceAll(s.Summary, "\n", " "))
				}
				return tw.Flush()
			default:
				return withHint(fmt.Errorf("gates: unknown format %q", format), "use --format text, json, json-schema, openai, anthropic or mcp")
			}
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text, json, or tool definitions with a JSON Schema of each gate's parameters: json-schema, openai, anthropic, mcp")
	cmd.Flags().String("workspace", "", "workspace the gates see (default: current directory)")
	return needsConfig(cmd)
}

// workspaceGates builds the configured gates for the configured workspace
// as the host sees it (gates, prompt), warnings on cmd's stderr; the caller
// closes the registry.
func (a *app) workspaceGates(cmd *cobra.Command) (*gates.Registry, map[string]string, string, error) {
	ws, err := resolveWorkspace(a.cfg.Sandbox.Workspace)
	if err != nil {
		return nil, nil, "", err
	}
	reg, kinds, err := buildRegistry(a.cfg, ws, ws, func(w string) { fmt.Fprintf(cmd.ErrOrStderr(), "gatebridge: warning: %s\n", w) })
	return reg, kinds, ws, err
}

// buildRegistry makes the gates the config declares, kind by kind (see
// gates.Kinds), then the tools of the configured MCP servers (started or
// connected to now: their tool lists name the gates), and says which kind
// each gate is (by name). inside is where the sandbox sees the workspace
// (for absolute paths in gate arguments). warn, when set, hears about
// tools that could not become gates. The caller closes the registry (it
// stops the MCP servers).
func buildRegistry(cfg *Config, workspace, inside string, warn func(string)) (*gates.Registry, map[string]string, error) {
	reg := gates.NewRegistry()
	kinds := map[string]string{}
	add := func(kind string, settings any, key, hint string) error {
		k, err := gates.LookupKind(kind)
		if err != nil {
			return err
		}
		gs, err := k.New(settings)
		if err != nil {
			return &configError{Key: key, Msg: err.Error(), Help: hint}
		}
		for _, g := range gs {
			if err := reg.Register(g); err != nil {
				return &configError{Key: key + ".name", Msg: err.Error(), Help: "pick another name"}
			}
			kinds[g.Spec().Name] = kind
		}
		return nil
	}
	if cfg.Gates.Builtins {
		if err := add(gates.KindBuiltin, builtinOptions(cfg, workspace, inside), "gates", "check gates.root and gates.writable_root"); err != nil {
			return nil, nil, err
		}
	}
	// Where the sandbox can write: a command gate's program must not be there.
	sessions := cfg.Bridge.SessionDir
	if sessions == "" {
		sessions = bridge.DefaultDir()
	}
	untrusted := []string{workspace, cfg.Gates.WritableRoot, sessions, cfg.Sandbox.Docker.SessionsRoot}
	for i, c := range cfg.Gates.Commands {
		err := add(gates.KindCommand, commandSpec(c, untrusted), fmt.Sprintf("gates.commands[%d]", i),
			"see docs/command-gates.md and the gates.commands example in configs/gatebridge.yaml")
		if err != nil {
			return nil, nil, err
		}
	}
	for _, name := range sortedMapKeys(cfg.MCP.Servers) {
		if err := addMCPServer(reg, kinds, name, cfg.MCP.Servers[name], untrusted, warn); err != nil {
			reg.Close()
			return nil, nil, err
		}
	}
	return reg, kinds, nil
}

// addMCPServer registers the tools of MCP server name as gates. Its
// program must not be where the sandbox can write (as a command gate's).
func addMCPServer(reg *gates.Registry, kinds map[string]string, name string, c MCPServerConfig, untrusted []string, warn func(string)) error {
	key := "mcp.servers." + name
	command := c.Command
	if len(command) > 0 {
		prog, err := exec.LookPath(command[0])
		if err == nil {
			prog, err = gates.TrustedCommand(prog, untrusted)
		}
		if err != nil {
			return &configError{Key: key + ".command", Msg: err.Error(),
				Help: "install the MCP server where only root or you can write, outside the workspace, the writable root and the session directories"}
		}
		// Start the program that was checked, not whatever PATH finds later.
		command = append([]string{prog}, command[1:]...)
	}
	gs, refused, err := mcptools.Connect(context.Background(), mcptools.Server{Name: name, Command: command, Env: c.Env,
		URL: c.URL, Headers: c.Headers, Tools: c.Tools, MaxTools: c.MaxTools, Prefix: c.Prefix, Timeout: c.Timeout, Approval: c.Approval == "ask",
		CacheDir: mcpCacheDir(untrusted)})
	var se *mcptools.SettingError
	switch {
	case errors.Is(err, mcptools.ErrNoSuchTool):
		return &configError{Key: key + ".tools", Msg: err.Error(), Help: "list only tools the server has (`gatebridge gates` without the list shows them)"}
	case errors.As(err, &se) && se.Field == "max_tools":
		return &configError{Key: key + ".max_tools", Msg: err.Error(),
			Help: fmt.Sprintf("name the tools to use in %s.tools, or raise %s.max_tools (each tool is a wrapper in every session)", key, key)}
	case errors.As(err, &se):
		return &configError{Key: key + "." + se.Field, Msg: err.Error(), Help: fmt.Sprintf("name fewer tools in %s.tools", key)}
	case err != nil:
		return &configError{Key: key, Msg: err.Error(), Help: "check that the server starts (command) or answers (url)"}
	}
	registered := 0
	for _, g := range gs {
		if err := reg.Register(g); err != nil {
			refused = append(refused, mcptools.Refused{Tool: g.Spec().Name, Err: err})
			continue
		}
		kinds[g.Spec().Name] = mcptools.KindMCP
		registered++
	}
	if registered == 0 && len(gs) > 0 {
		// No gate of it in the registry, so the registry will not close
		// the server: close it now.
		if cl, ok := gs[0].(gates.Closer); ok {
			cl.Close()
		}
	}
	for _, r := range refused {
		if warn != nil {
			warn(fmt.Sprintf("%s: %s", key, r))
		}
	}
	return nil
}

// builtinOptions are the built-in gates' settings.
func builtinOptions(cfg *Config, workspace, inside string) gates.Options {
	root, insideRoot := cfg.Gates.Root, inside
	if root == "" {
		root = workspace
	} else {
		insideRoot = ""
	}
	o := gates.Options{
		Root: root, SandboxRoot: insideRoot,
		WritableRoot:       cfg.Gates.WritableRoot,
		MaxFileBytes:       cfg.Gates.MaxFileBytes,
		MaxSearchMatches:   cfg.Gates.MaxSearchMatches,
		MaxSearchFiles:     cfg.Gates.MaxSearchFiles,
		MaxSearchFileBytes: cfg.Gates.MaxSearchFileBytes,
		ProtectedPaths:     cfg.Sandbox.ProtectedPaths,
	}
	if o.WritableRoot != "" && o.WritableRoot == root {
		o.SandboxWritableRoot = insideRoot
	}
	return o
}

// commandSpec is one command gate's settings.
func commandSpec(c CommandConfig, untrusted []string) gates.CommandSpec {
	spec := gates.CommandSpec{
		Name: c.Name, Summary: c.Summary, Command: c.Command, AllowArgs: c.AllowArgs,
		AllowPattern: c.AllowPattern, EndOfOptions: c.EndOfOptions, Home: c.Home,
		Dir: c.Dir, Timeout: c.Timeout, MaxOutputBytes: c.MaxOutputBytes,
		Env: c.Env, Stdin: c.Stdin, Untrusted: untrusted,
	}
	for _, a := range c.Args {
		spec.Args = append(spec.Args, gates.ArgRule{Name: a.Name, Pattern: a.Pattern, Optional: a.Optional, Variadic: a.Variadic, Max: a.Max})
	}
	for _, o := range c.Options {
		spec.Options = append(spec.Options, gates.OptionRule{Name: o.Name, Value: o.Value})
	}
	return spec
}

// writeToolSchemas prints every gate as a tool definition in the shape an
// API takes: json-schema {name, description, schema}, openai
// {type: function, function: {name, description, parameters}}, anthropic
// {name, description, input_schema}, mcp {name, description, inputSchema}.
func writeToolSchemas(w io.Writer, format string, reg *gates.Registry) error {
	var out []any
	for _, spec := range reg.Specs() {
		g, err := reg.Lookup(spec.Name)
		if err != nil {
			continue
		}
		desc := spec.Summary
		if spec.Usage != "" {
			desc += " Usage: " + spec.Usage
		}
		schema := gates.SchemaOf(g)
		switch format {
		case "json-schema":
			out = append(out, map[string]any{"name": spec.Name, "description": desc, "schema": schema})
		case "openai":
			out = append(out, map[string]any{"type": "function", "function": map[string]any{"name": spec.Name, "description": desc, "parameters": schema}})
		case "anthropic":
			out = append(out, map[string]any{"name": spec.Name, "description": desc, "input_schema": schema})
		case "mcp":
			out = append(out, map[string]any{"name": spec.Name, "description": desc, "inputSchema": schema})
		}
	}
	if out == nil {
		out = []any{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func newPromptCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "prompt",
		Short: "Print the capability text for a system prompt: how the sandboxed shell behaves, and every gate with its usage",
		Long: `Print the text a runtime puts in its system prompt so a model knows the
sandboxed shell: the same text as gatebridge mcp's bash tool description,
for the configured sandbox and workspace.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := a.cfg
			reg, kinds, ws, err := a.workspaceGates(cmd)
			if err != nil {
				return err
			}
			defer reg.Close()
			var docs []rpc.GateDoc
			for _, s := range reg.Specs() {
				docs = append(docs, rpc.GateDoc{Name: s.Name, Summary: s.Summary, Usage: s.Usage, Kind: kinds[s.Name]})
			}
			inside := ws
			if cfg.Sandbox.Backend == docker.Name {
				inside = docker.DefaultWorkspacePath
			}
			maxOut := cfg.Sandbox.MaxOutput
			if maxOut <= 0 {
				maxOut = sandbox.DefaultMaxOutput
			}
			_, err = io.WriteString(cmd.OutOrStdout(), capabilityText(cfg.Sandbox.Backend, inside, cfg.Sandbox.WritableWorkspace, cfg.Sandbox.Timeout, maxOut, false, docs))
			return err
		},
	}
	cmd.Flags().String("sandbox", autoBackend, "sandbox backend: "+backendChoices(a.backends))
	cmd.Flags().String("workspace", "", "workspace the gates see (default: current directory)")
	cmd.Flags().Bool("writable-workspace", false, "the sandbox may write the workspace")
	return needsConfig(cmd)
}

// mcpCacheDir is where stdio MCP servers' tool lists are kept, so that a
// server starts at its first call rather than with every run:
// $XDG_CACHE_HOME/gatebridge/mcp. "" (every server starts at once) when
// there is no cache dir, or it lies where the sandbox writes: a planted
// tool list would not change what runs, but would change what the gates
// say and accept.
func mcpCacheDir(untrusted []string) string {
	base, err := os.UserCacheDir()
	if err != nil || !filepath.IsAbs(base) {
		return ""
	}
	dir := filepath.Join(base, "gatebridge", "mcp")
	real := dir
	if r, err := filepath.EvalSymlinks(base); err == nil {
		real = filepath.Join(r, "gatebridge", "mcp")
	}
	for _, u := range untrusted {
		if u == "" {
			continue
		}
		if r, err := filepath.EvalSymlinks(u); err == nil {
			u = r
		}
		if fspath.Within(real, u) || fspath.Within(dir, u) {
			return ""
		}
	}
	return dir
}
