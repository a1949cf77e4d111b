package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/sandbox"
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
func attach(opts *rpc.Options, dir string, readOnlyWorkspace bool) (func(), error) {
	bad := func(err error, hint string) (func(), error) {
		return nil, &usageError{withHint(fmt.Errorf("serve: --attach %s: %w", dir, err), hint)}
	}
	if !filepath.IsAbs(dir) {
		return bad(errors.New("must be an absolute path"), "the shared directory as both containers mount it, e.g. --attach /gatebridge")
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		if err == nil {
			err = errors.New("not a directory")
		}
		return bad(err, "mount the volume shared with the sandbox container there")
	}
	dir = filepath.Clean(dir)
	agentDir := filepath.Join(dir, agent.AttachedAgentDir)
	if err := agent.Prepare(agentDir, -1, -1); err != nil {
		return nil, withHint(fmt.Errorf("serve: --attach: prepare %s: %w", agentDir, err), "gatebridge must be able to write the shared directory")
	}
	sessions := filepath.Join(dir, agent.AttachedSessionsDir)
	if err := os.MkdirAll(sessions, 0o711); err != nil {
		return nil, fmt.Errorf("serve: --attach: %w", err)
	}
	// Traversable, not listable: a session is granted to the agent's user
	// alone.
	if err := os.Chmod(sessions, 0o711); err != nil {
		return nil, fmt.Errorf("serve: --attach: %w", err)
	}

	var mu sync.Mutex
	var conn *agent.Conn
	dial := func() (*agent.Conn, error) {
		mu.Lock()
		defer mu.Unlock()
		if conn == nil {
			ctx, cancel := context.WithTimeout(context.Background(), attachWait)
			defer cancel()
			c, err := agent.Dial(ctx, agentDir, agent.DialOptions{Wait: attachWait})
			if err != nil {
				return nil, &sandbox.Error{Backend: agent.Name, Op: "attach", Err: err,
					Hint: "start the sandbox container with `gatebridge agent --dir " + agentDir + "` (the same path inside)"}
			}
			conn = c
		}
		return conn, nil
	}
	reg := &sandbox.Registry{}
	if err := reg.Register(sandbox.BackendEntry{
		Name:      agent.Name,
		Summary:   "a sandbox started by someone else (a pod's container) running gatebridge agent on " + agentDir,
		Isolates:  "what the sandbox's own runtime gives (its pod's security context); gatebridge only carries commands",
		Platforms: []string{"linux"},
		Strength:  1,
		New: func(sandbox.Settings) (sandbox.Backend, error) {
			c, err := dial()
			if err != nil {
				return nil, err
			}
			return &agent.Attached{Conn: c, Root: dir, WorkspaceReadOnly: readOnlyWorkspace}, nil
		},
	}); err != nil {
		return nil, err
	}
	opts.Backends = reg
	opts.AllowUnsandboxed = false
	opts.Bridge.Dir = sessions
	// Sessions are handed to the agent's user (the owner of its hello).
	opts.RunAs = func(string) (int, int) {
		c, err := dial()
		if err != nil {
			return os.Geteuid(), os.Getegid()
		}
		return c.User()
	}
	return func() {
		mu.Lock()
		defer mu.Unlock()
		if conn != nil {
			conn.Close()
		}
	}, nil
}
