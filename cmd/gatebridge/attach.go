package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/internal/config"
	"github.com/gatebridge/gatebridge/sandbox/agent"
)

// attachWait bounds the wait for the agent at the first sandbox/open: in
// a pod the sandbox container may start after the sidecar.
const attachWait = 60 * time.Second

// attach points the protocol server at a sandbox it does not start
// (`serve --attach DIR`): a container sharing DIR (and the workspace) at
// the same paths and running `gatebridge agent --dir DIR/agent`. Its one
// backend, "attached", replaces every other: a client cannot open a
// local or docker sandbox on the sidecar. The returned function closes
// the connection to the agent.
//
// The sandbox's mounts are the pod's: with a writable workspace, attach
// refuses to start unless sandbox.attach.read_only_paths declares every
// protected path mounted read-only there for some workspace, and a
// sandbox opens only on such a workspace.
func attach(opts *rpc.Options, dir string, readOnlyWorkspace bool, declared config.AttachConfig) (func(), error) {
	bad := func(err error, hint string) (func(), error) {
		return nil, &usageError{withHint(fmt.Errorf("serve: --attach %s: %w", dir, err), hint)}
	}
	if protected := opts.Process.ProtectedPaths; !readOnlyWorkspace && len(protected) > 0 {
		ws, err := agent.CheckDeclared(protected, declared.ReadOnlyPaths)
		if err != nil {
			return nil, &usageError{fmt.Errorf("serve: --attach %w", err)}
		}
		if opts.Logf != nil {
			opts.Logf("gatebridge: serve: --attach: writable workspaces with their protected paths declared read-only (sandbox.attach.read_only_paths): %s", strings.Join(ws, ", "))
		}
		// Refused at sandbox/open, before anything runs (the attached
		// backend checks each command again).
		gatesFor := opts.Gates
		opts.Gates = func(workspace, inside string, writable bool) (*gates.Registry, map[string]string, error) {
			if writable {
				var pe *agent.ProtectedError
				if err := agent.CheckWritable(inside, protected, declared.ReadOnlyPaths); errors.As(err, &pe) {
					return nil, nil, &rpc.Error{Code: rpc.CodeInvalidParams, Message: "invalid params: " + pe.Error(), Data: map[string]string{"hint": pe.Help}}
				} else if err != nil {
					return nil, nil, err
				}
			}
			if gatesFor == nil {
				return nil, nil, nil
			}
			return gatesFor(workspace, inside, writable)
		}
	}
	att, err := agent.Attach(dir, readOnlyWorkspace, declared.ReadOnlyPaths, attachWait)
	var de *agent.DirError
	if errors.As(err, &de) {
		return bad(de.Err, de.Help)
	}
	if err != nil {
		return nil, withHint(fmt.Errorf("serve: --attach: %w", err), "gatebridge must be able to write the shared directory")
	}
	// Traversable, not listable (0711): a session is granted to the
	// agent's user alone. The check of the default session parent: a
	// directory of ours, no link, no one else may write it.
	if err := bridge.EnsurePrivateParent(att.SessionsDir); err != nil {
		return bad(err, "remove it (the sandbox may have made it); gatebridge makes it")
	}
	opts.Backends = att.Backends
	opts.AllowUnsandboxed = false
	opts.Bridge.Dir = att.SessionsDir
	// Sessions are handed to the agent's user (the owner of its hello).
	opts.RunAs = func(string) (int, int) { return att.User() }
	return att.Close, nil
}
