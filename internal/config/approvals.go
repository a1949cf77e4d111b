package config

import (
	"cmp"
	"encoding/json"
	"errors"
	"io"

	"github.com/gatebridge/gatebridge/bridge/approval"
	"github.com/gatebridge/gatebridge/bridge/cmdpolicy"
	"github.com/gatebridge/gatebridge/gates"
)

// CompilePolicy builds the command policy (policy.commands; nil without
// it), the gate names it may not shadow being the command and http
// gates'. The defaults it takes are written into c (config show prints
// the values in effect).
func (c *Config) CompilePolicy() (*cmdpolicy.Policy, error) {
	pc := c.Policy.Commands
	if pc == nil {
		return nil, nil
	}
	pc.Default = cmp.Or(pc.Default, "allow")
	pc.Unknown = cmp.Or(pc.Unknown, "ask")
	var gateNames []string
	for _, g := range c.Gates.Commands {
		gateNames = append(gateNames, g.Name)
	}
	for _, g := range c.Gates.HTTP {
		gateNames = append(gateNames, g.Name)
	}
	p, err := cmdpolicy.New(*pc, cmdpolicy.WithGates(gateNames...))
	var ce *cmdpolicy.ConfigError
	if errors.As(err, &ce) {
		return nil, &Error{Key: ce.Key, Msg: ce.Msg, Help: ce.Help}
	}
	return p, err
}

// GrantsStore is the grants file: approvals.grants_file, or
// $XDG_CONFIG_HOME/gatebridge/grants.yaml.
func (c *Config) GrantsStore() (*approval.Store, error) {
	s, err := approval.OpenStore(c.Approvals.GrantsFile)
	if err != nil {
		return nil, &Error{Key: "approvals.grants_file", Msg: err.Error(), Help: "an absolute path outside every workspace"}
	}
	return s, nil
}

// ApprovalSettings are the settings of command and http gates, by name
// (MCP tools carry their own).
func (c *Config) ApprovalSettings() map[string]approval.Setting {
	settings := map[string]approval.Setting{}
	for _, g := range c.Gates.Commands {
		settings[g.Name], _ = approval.ParseSetting(g.Approval)
	}
	for _, h := range c.Gates.HTTP {
		settings[h.Name], _ = approval.ParseSetting(h.Approval)
	}
	return settings
}

// ApprovalConfig is the approval decider's config (run, sandbox exec,
// serve): approvals.*, the gates' settings, the command policy (checked
// again at each gate call), every decision a JSON line in audit (nil:
// nowhere), redacted with redact.
func (c *Config) ApprovalConfig(store *approval.Store, policy *cmdpolicy.Policy, audit io.Writer, redact func(string) string) approval.Config {
	return approval.Config{Timeout: c.Approvals.Timeout, MaxPending: c.Approvals.MaxPending,
		Store: store, Settings: c.ApprovalSettings(), Commands: policy, Redact: redact,
		Record: func(r approval.Record) {
			if line, err := json.Marshal(r); err == nil && audit != nil {
				audit.Write(append(line, '\n'))
			}
		}}
}

// RunApprovals is the decider of run and sandbox exec: it asks the
// person at the controlling terminal (term; nil when no gate asks or
// there is no terminal) and records every decision in audit. local marks
// an unsandboxed backend in the prompt. A grants file inside workspace
// is refused.
func (c *Config) RunApprovals(reg *gates.Registry, workspace string, local bool, policy *cmdpolicy.Policy, audit io.Writer, redact func(string) string) (*approval.Decider, *approval.Terminal, error) {
	store, err := c.GrantsStore()
	if err != nil {
		return nil, nil, err
	}
	if err := store.Inside(workspace); err != nil {
		return nil, nil, err
	}
	note := ""
	if local {
		note = approval.LocalNote
	}
	d, term := approval.WithTerminal(c.ApprovalConfig(store, policy, audit, redact), reg, note)
	return d, term, nil
}
