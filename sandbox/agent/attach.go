package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/gatebridge/gatebridge/internal/hint"
	"github.com/gatebridge/gatebridge/internal/hostilefs"
	"github.com/gatebridge/gatebridge/sandbox"
)

// An Attachment is a sandbox gatebridge does not start (`serve --attach
// DIR`): a container sharing DIR (and the workspace) at the same paths
// and running `gatebridge agent --dir DIR/agent`. Its registry holds one
// backend, "attached", which dials the agent at its first use.
type Attachment struct {
	// Backends holds the one backend, [Name].
	Backends *sandbox.Registry
	// SessionsDir is where sessions live (DIR/sessions); the caller
	// makes it, a private parent of session dirs.
	SessionsDir string

	agentDir string
	wait     time.Duration
	mu       sync.Mutex
	conn     *Conn
}

// A DirError is a shared directory [Attach] refuses: what is wrong (Err)
// and how to fix it (Help).
type DirError struct{ hint.Hinted }

// Attach prepares dir, shared with the sandbox's container, for an
// attached sandbox: dir must be an absolute directory, made sticky when
// others may write it (guardShared); DIR/agent is made ours and prepared
// for the agent. The attached backend waits up to wait for the agent;
// workspaceReadOnly and readOnlyPaths are what the pod declares
// ([Attached]). A refused directory is a *DirError.
func Attach(dir string, workspaceReadOnly bool, readOnlyPaths []string, wait time.Duration) (*Attachment, error) {
	bad := func(err error, help string) (*Attachment, error) {
		return nil, &DirError{hint.Hinted{Err: err, Help: help}}
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
	agentDir := filepath.Join(dir, AttachedAgentDir)
	if err := hostilefs.EnsureOwnedDir(agentDir, 0o755); err != nil {
		return bad(err, "remove it (the sandbox may have made it); gatebridge makes it")
	}
	if err := Prepare(agentDir, -1, -1); err != nil {
		return nil, fmt.Errorf("prepare %s: %w", agentDir, err)
	}
	a := &Attachment{Backends: &sandbox.Registry{}, SessionsDir: filepath.Join(dir, AttachedSessionsDir), agentDir: agentDir, wait: wait}
	if err := a.Backends.Register(sandbox.BackendEntry{
		Name:      Name,
		Summary:   "a sandbox started by someone else (a pod's container) running gatebridge agent on " + agentDir,
		Isolates:  "what the sandbox's own runtime gives (its pod's security context); gatebridge only carries commands",
		Platforms: []string{"linux"},
		Strength:  1,
		New: func(sandbox.Settings) (sandbox.Backend, error) {
			c, err := a.dial()
			if err != nil {
				return nil, err
			}
			return &Attached{Conn: c, Root: dir, WorkspaceReadOnly: workspaceReadOnly, ReadOnlyPaths: readOnlyPaths}, nil
		},
	}); err != nil {
		return nil, err
	}
	return a, nil
}

// dial connects to the agent once, waiting for it (in a pod the sandbox
// container may start after the sidecar).
func (a *Attachment) dial() (*Conn, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conn == nil {
		c, err := Dial(context.Background(), a.agentDir, DialOptions{Wait: a.wait})
		if err != nil {
			return nil, &sandbox.Error{Backend: Name, Op: "attach", Err: err,
				Help: "start the sandbox container with `gatebridge agent --dir " + a.agentDir + "` (the same path inside)"}
		}
		a.conn = c
	}
	return a.conn, nil
}

// User is the agent's user (the owner of its hello), whom sessions are
// handed to; gatebridge's own when the agent cannot be reached.
func (a *Attachment) User() (uid, gid int) {
	c, err := a.dial()
	if err != nil {
		return os.Geteuid(), os.Getegid()
	}
	return c.User()
}

// Close closes the connection to the agent.
func (a *Attachment) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conn != nil {
		a.conn.Close()
	}
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
