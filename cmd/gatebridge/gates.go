package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/gates/mcptools"
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
			cfg := a.cfg
			ws, err := resolveWorkspace(cfg.Sandbox.Workspace)
			if err != nil {
				return err
			}
			reg, kinds, err := buildRegistry(cfg, ws, ws, func(w string) { fmt.Fprintf(cmd.ErrOrStderr(), "gatebridge: warning: %s\n", w) })
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
				return withHint(fmt.Errorf("gates: unknown format %q", format), "use --format text or --format json")
			}
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	cmd.Flags().String("workspace", "", "workspace the gates see (default: current directory)")
	return needsConfig(cmd)
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
			return &configError{Key: key, Msg: err.Error(), Hint: hint}
		}
		for _, g := range gs {
			if err := reg.Register(g); err != nil {
				return &configError{Key: key + ".name", Msg: err.Error(), Hint: "pick another name"}
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
		sessions = mailbox.DefaultDir()
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
	if len(c.Command) > 0 {
		prog, err := exec.LookPath(c.Command[0])
		if err != nil {
			return &configError{Key: key + ".command", Msg: err.Error(), Hint: "give the server's program by absolute path, or put it on PATH"}
		}
		if abs, err := filepath.Abs(prog); err == nil {
			if r, err := filepath.EvalSymlinks(abs); err == nil {
				abs = r
			}
			for _, u := range untrusted {
				if u == "" {
					continue
				}
				if ru, err := filepath.EvalSymlinks(u); err == nil {
					u = ru
				}
				if abs == u || strings.HasPrefix(abs, strings.TrimSuffix(u, "/")+"/") {
					return &configError{Key: key + ".command", Msg: fmt.Sprintf("%s is inside %s, which the sandbox can write", abs, u),
						Hint: "install the MCP server outside the workspace, the writable root and the session directories"}
				}
			}
		}
	}
	gs, refused, err := mcptools.Connect(context.Background(), mcptools.Server{Name: name, Command: c.Command, Env: c.Env,
		URL: c.URL, Headers: c.Headers, Tools: c.Tools, Prefix: c.Prefix, Timeout: c.Timeout, Approval: c.Approval == "ask"})
	if err != nil {
		return &configError{Key: key, Msg: err.Error(), Hint: "check that the server starts (command) or answers (url)"}
	}
	for _, g := range gs {
		if err := reg.Register(g); err != nil {
			refused = append(refused, mcptools.Refused{Tool: g.Spec().Name, Err: err})
			if cl, ok := g.(gates.Closer); ok && len(gs) == 1 {
				cl.Close()
			}
			continue
		}
		kinds[g.Spec().Name] = mcptools.KindMCP
	}
	for _, r := range refused {
		if warn != nil {
			warn(fmt.Sprintf("%s: tool %s is not a gate: %v", key, r.Tool, r.Err))
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
