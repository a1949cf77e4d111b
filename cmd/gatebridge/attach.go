package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/gatebridge/gatebridge/internal/config"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/internal/hostilefs"
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
		ws := agent.ProtectedWorkspaces(protected, declared.ReadOnlyPaths)
		if len(ws) == 0 {
			var eg []string
			for _, p := range protected {
				eg = append(eg, path.Join("/workspace", p))
			}
			return nil, &usageError{withHint(
				fmt.Errorf("serve: --attach with a writable workspace: protected path %s (sandbox.protected_paths) is not declared read-only in the sandbox's container for any workspace (sandbox.attach.read_only_paths %q): gatebridge cannot make it read-only there, and the sandbox could plant what host tools run",
					strings.Join(protected, ", "), declared.ReadOnlyPaths),
				fmt.Sprintf("mount each read-only in the sandbox's container (a readOnly subPath volumeMount of the workspace, as deploy/k8s/pod.yaml does), then declare where, as absolute paths: for a workspace /workspace, sandbox.attach.read_only_paths: [%s] (or GATEBRIDGE_SANDBOX_ATTACH_READ_ONLY_PATHS=%s); or mount the workspace read-only and pass --attach-readonly-workspace",
					strings.Join(eg, ", "), strings.Join(eg, ",")))}
		}
		if opts.Logf != nil {
			opts.Logf("gatebridge: serve: --attach: writable workspaces with their protected paths declared read-only (sandbox.attach.read_only_paths): %s", strings.Join(ws, ", "))
		}
		// Refused at sandbox/open, before anything runs (the attached
		// backend checks each command again).
		gatesFor := opts.Gates
		opts.Gates = func(workspace, inside string, writable bool) (*gates.Registry, map[string]string, error) {
			if writable {
				if un := agent.Uncovered(inside, protected, declared.ReadOnlyPaths); len(un) > 0 {
					return nil, nil, &rpc.Error{Code: rpc.CodeInvalidParams,
						Message: fmt.Sprintf("invalid params: \"workspace\" %s: protected path %s (sandbox.protected_paths) is not declared read-only in the sandbox's container (sandbox.attach.read_only_paths): the sandbox could write it", inside, strings.Join(un, ", ")),
						Data:    map[string]string{"hint": agent.ProtectedHint(protected, declared.ReadOnlyPaths)}}
				}
				// No link on the way to one (see agent.Attached.Run).
				if _, err := sandbox.ProtectedPaths(agent.Name, &sandbox.Spec{Workspace: inside, WorkspaceWritable: true, ProtectedPaths: protected}); err != nil {
					return nil, nil, err
				}
			}
			if gatesFor == nil {
				return nil, nil, nil
			}
			return gatesFor(workspace, inside, writable)
		}
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
	if err := guardShared(dir); err != nil {
		return bad(err, "mount it owned by gatebridge's user, or with the sticky bit (chmod +t), so that the sandbox cannot rename what gatebridge keeps there")
	}
	agentDir := filepath.Join(dir, agent.AttachedAgentDir)
	if err := hostilefs.EnsureOwnedDir(agentDir, 0o755); err != nil {
		return bad(err, "remove it (the sandbox may have made it); gatebridge makes it")
	}
	if err := agent.Prepare(agentDir, -1, -1); err != nil {
		return nil, withHint(fmt.Errorf("serve: --attach: prepare %s: %w", agentDir, err), "gatebridge must be able to write the shared directory")
	}
	// Traversable, not listable (0711): a session is granted to the
	// agent's user alone. The check of the default session parent: a
	// directory of ours, no link, no one else may write it.
	sessions := filepath.Join(dir, agent.AttachedSessionsDir)
	if err := bridge.EnsurePrivateParent(sessions); err != nil {
		return bad(err, "remove it (the sandbox may have made it); gatebridge makes it")
	}

	var mu sync.Mutex
	var conn *agent.Conn
	dial := func() (*agent.Conn, error) {
		mu.Lock()
		defer mu.Unlock()
		if conn == nil {
			c, err := agent.Dial(context.Background(), agentDir, agent.DialOptions{Wait: attachWait})
			if err != nil {
				return nil, &sandbox.Error{Backend: agent.Name, Op: "attach", Err: err,
					Help: "start the sandbox container with `gatebridge agent --dir " + agentDir + "` (the same path inside)"}
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
			return &agent.Attached{Conn: c, Root: dir, WorkspaceReadOnly: readOnlyWorkspace, ReadOnlyPaths: declared.ReadOnlyPaths}, nil
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

// guardShared makes the shared directory safe to keep gatebridge's
// entries in. The sandbox writes it (a pod's emptyDir is 0777), and in a
// directory others may write, any of them can rename or replace an entry
// unless the directory is sticky: then only the entry's owner can. So a
// directory of ours that others may write is made sticky, and one that
// only its owner, not gatebridge, could make sticky is refused.
func guardShared(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	mode := fi.Mode()
	if mode.Perm()&0o022 == 0 || mode&os.ModeSticky != 0 {
		return nil
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("others may write it (mode %v) and it is not sticky; it belongs to another user, so gatebridge cannot make it sticky", mode.Perm())
	}
	return os.Chmod(dir, mode.Perm()|os.ModeSticky)
}
