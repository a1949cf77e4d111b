package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/bridge/approval"
	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/bridge/mcpserver"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/gates/httpgate"
	"github.com/gatebridge/gatebridge/gates/mcptools"
	"github.com/gatebridge/gatebridge/internal/config"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/bwrap"
	"github.com/gatebridge/gatebridge/sandbox/docker"
)

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
				docs := gates.Docs(reg, kinds)
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
	ws, err := config.ResolveWorkspace(a.cfg.Sandbox.Workspace)
	if err != nil {
		return nil, nil, "", err
	}
	reg, kinds, err := buildRegistry(cmd.Context(), a.kinds, a.cfg, ws, ws, func(w string) { fmt.Fprintf(cmd.ErrOrStderr(), "gatebridge: warning: %s\n", w) })
	return reg, kinds, ws, err
}

// gateSources are the sources of gates the config declares, in the order
// they are built (a name an earlier gate took is a clash for a later one):
// the built-in gates (gates.builtins), the command gates (gates.commands),
// the tools of each MCP server (mcp.servers, by name).
func gateSources(cfg *Config) []gates.Source {
	var srcs []gates.Source
	if cfg.Gates.Builtins {
		srcs = append(srcs, gates.Source{Kind: gates.KindBuiltin, Key: "gates", Hint: "check gates.root and gates.writable_root", Settings: cfg.BuiltinOptions()})
	}
	for i, c := range cfg.Gates.Commands {
		srcs = append(srcs, gates.Source{Kind: gates.KindCommand, Key: fmt.Sprintf("gates.commands[%d]", i),
			Hint: "see docs/command-gates.md and the gates.commands example in `gatebridge config example`", Settings: c.Spec()})
	}
	for i, h := range cfg.Gates.HTTP {
		srcs = append(srcs, gates.Source{Kind: httpgate.KindHTTP, Key: fmt.Sprintf("gates.http[%d]", i),
			Hint: "see docs/broker.md and the gates.http example in configs/gatebridge.yaml", Settings: h.Gate()})
	}
	for _, name := range config.SortedKeys(cfg.MCP.Servers) {
		c := cfg.MCP.Servers[name]
		srcs = append(srcs, gates.Source{Kind: mcptools.KindMCP, Key: "mcp.servers." + name, Settings: mcptools.Server{
			Name: name, Command: c.Command, Env: c.Env, EnvPassthrough: c.EnvPassthrough, URL: c.URL, Headers: c.Headers, Tools: c.Tools, MaxTools: c.MaxTools,
			Prefix: c.Prefix, Timeout: c.Timeout, Approval: c.Approval, ToolApproval: c.ToolApproval, Isolate: c.Isolate.Spec()}})
	}
	return srcs
}

// buildRegistry makes the gates the config declares, source by source
// (gateSources), each by its kind (kinds), and says which kind each gate
// is (by name). MCP servers are started or connected to now: their tool
// lists name the gates. inside is where the sandbox sees the workspace
// (for absolute paths in gate arguments). warn, when set, hears about
// gates left out (MCP tools refused or whose name is taken). The caller
// closes the registry (it stops the MCP servers).
func buildRegistry(ctx context.Context, kinds *gates.KindRegistry, cfg *Config, workspace, inside string, warn func(string)) (*gates.Registry, map[string]string, error) {
	sessions := cfg.Bridge.SessionDir
	if sessions == "" {
		sessions = bridge.DefaultDir()
	}
	env := gates.Env{Workspace: workspace, Inside: inside, Untrusted: cfg.UntrustedDirs(workspace), Secrets: cfg.secrets,
		Isolator: gateIsolator(cfg), Protected: cfg.Sandbox.ProtectedPaths,
		Sessions: []string{sessions, cfg.Sandbox.Docker.SessionsRoot}}
	reg, kindOf, err := kinds.Build(ctx, gateSources(cfg), env, warn)
	if se := (*gates.SourceError)(nil); errors.As(err, &se) {
		// a server's error may quote what it was sent
		return nil, nil, &configError{Key: se.Key, Msg: cfg.secrets.Redactor().String(se.Err.Error()), Help: se.Help}
	}
	if err != nil {
		return nil, nil, err
	}
	// approval: deny refuses on every front end, asking or not
	if err := approval.Refuse(reg, cfg.ApprovalSettings()); err != nil {
		reg.Close()
		return nil, nil, err
	}
	return reg, kindOf, nil
}

// gateIsolator is the sandbox gates' programs run in (bwrap's Isolator):
// sandbox.bwrap's path and read_only, as sandbox.gate_uid:gate_gid when
// gatebridge is root (0 means bwrap.GateUID: never root, and not the
// sandboxed commands' uid), under sandbox.limits.
func gateIsolator(cfg *Config) gates.Isolator {
	return bwrapGates{&bwrap.Isolator{Path: cfg.Sandbox.Bwrap.Path, ReadOnly: cfg.Sandbox.Bwrap.ReadOnly,
		UID: cfg.Sandbox.GateUID, GID: cfg.Sandbox.GateGID, Limits: cfg.SandboxLimits()}}
}

// bwrapGates adapts a bwrap.Isolator to gates.Isolator (package sandbox
// does not know gates).
type bwrapGates struct{ *bwrap.Isolator }

var (
	_ gates.Isolator         = bwrapGates{}
	_ gates.IsolationChecker = bwrapGates{}
)

func (b bwrapGates) Isolate(ctx context.Context, cmd *exec.Cmd, s gates.IsolateSpec) (func(), error) {
	return b.Isolator.Isolate(ctx, cmd, bwrap.Confinement{Read: s.Read, Write: s.Write, Network: s.Network})
}

// writeToolSchemas prints every gate as a tool definition in the shape an
// API takes (gates.ToolDefs).
func writeToolSchemas(w io.Writer, format string, reg *gates.Registry) error {
	out, err := gates.ToolDefs(reg, format)
	if err != nil {
		return err
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
			reg, _, ws, err := a.workspaceGates(cmd)
			if err != nil {
				return err
			}
			defer reg.Close()
			inside := ws
			if cfg.Sandbox.Backend == docker.Name {
				inside = docker.DefaultWorkspacePath
			}
			maxOut := cfg.Sandbox.MaxOutput
			if maxOut <= 0 {
				maxOut = sandbox.DefaultMaxOutput
			}
			text := mcpserver.CapabilityText(cfg.Sandbox.Backend, inside, cfg.Sandbox.WritableWorkspace, cfg.Sandbox.Timeout, maxOut, false, reg.Specs())
			if lim := control.CommandLimitsText(cfg.Sandbox.MaxCommandBytes, cfg.Sandbox.MaxCommands); lim != "" { // ends the first paragraph
				text = strings.Replace(text, "\n\n", " "+strings.TrimSpace(lim)+"\n\n", 1)
			}
			_, err = io.WriteString(cmd.OutOrStdout(), text)
			return err
		},
	}
	cmd.Flags().String("sandbox", autoBackend, "sandbox backend: "+config.BackendChoices(a.backends))
	cmd.Flags().String("workspace", "", "workspace the gates see (default: current directory)")
	cmd.Flags().Bool("writable-workspace", false, "the sandbox may write the workspace")
	return needsConfig(cmd)
}
