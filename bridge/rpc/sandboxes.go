package rpc

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"

	"github.com/gatebridge/gatebridge/bridge/control"
)

// idPattern is what sandboxId and processId must match: they appear in
// logs and container names.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

func checkID(field, id string) error {
	if err := required(field, id); err != nil {
		return err
	}
	if !idPattern.MatchString(id) {
		return errorf(CodeInvalidParams, "invalid params: %q %q: use 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit", field, id)
	}
	return nil
}

// sbox is one sandbox of a connection: the control plane's, once open.
type sbox struct {
	id string
	// ready is closed when sandbox/open is done; openErr says whether it
	// failed, else cs is the sandbox.
	ready   chan struct{}
	openErr *Error
	cs      *control.Sandbox
}

func (c *conn) sandboxOpen(params json.RawMessage) (any, error) {
	var p SandboxOpenParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	if err := checkID("sandboxId", p.SandboxID); err != nil {
		return nil, err
	}
	if p.Backend == "" {
		p.Backend = control.Auto
	}
	if err := required("workspace", p.Workspace); err != nil {
		return nil, err
	}
	spec := control.SandboxSpec{ID: p.SandboxID, Backend: p.Backend, Workspace: p.Workspace, Writable: p.WritableWorkspace,
		Image: p.Image, Runtime: p.Runtime, Gates: c.gates, Approver: approver{c}}
	if err := c.srv.host.Check(&spec); err != nil {
		return nil, err
	}
	env, err := envList("env", p.Env)
	if err != nil {
		return nil, err
	}
	spec.Env = env

	// Reserve the id and a slot before the slow part.
	c.mu.Lock()
	if _, dup := c.sandboxes[p.SandboxID]; dup {
		c.mu.Unlock()
		return nil, errorf(CodeConflict, "sandbox %q is already open on this connection", p.SandboxID)
	}
	if len(c.sandboxes) >= c.srv.opts.MaxSandboxes {
		c.mu.Unlock()
		return nil, errorf(CodeLimit, "%d sandboxes are open (limit maxSandboxes); close one first", len(c.sandboxes))
	}
	sb := &sbox{id: p.SandboxID, ready: make(chan struct{})}
	c.sandboxes[p.SandboxID] = sb
	c.mu.Unlock()
	return later(func() (any, error) {
		cs, err := c.srv.host.Open(c.ctx, spec)
		if err != nil {
			c.mu.Lock()
			if c.sandboxes[p.SandboxID] == sb {
				delete(c.sandboxes, p.SandboxID)
			}
			c.mu.Unlock()
			sb.openErr = toError(err)
			close(sb.ready)
			return nil, err
		}
		sb.cs = cs
		close(sb.ready)
		reason := cs.Reason()
		if reason == "" {
			reason = "chosen by the client"
		}
		return &SandboxOpenResult{SandboxID: sb.id, Backend: cs.Backend(), Reason: reason, WorkspaceInside: cs.WorkspaceInside()}, nil
	}), nil
}

func (c *conn) sandboxClose(params json.RawMessage) (any, error) {
	var p SandboxCloseParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	if err := required("sandboxId", p.SandboxID); err != nil {
		return nil, err
	}
	c.mu.Lock()
	sb := c.sandboxes[p.SandboxID]
	delete(c.sandboxes, p.SandboxID)
	c.mu.Unlock()
	if sb == nil {
		return nil, errorf(CodeNotFound, "no open sandbox %q", p.SandboxID)
	}
	return later(func() (any, error) {
		sb.close()
		return struct{}{}, nil
	}), nil
}

// close waits for the open and closes the sandbox (its processes are
// stopped; their output and exit are still reported).
func (sb *sbox) close() {
	<-sb.ready
	if sb.cs != nil {
		sb.cs.Close()
	}
}

// envList turns a JSON env object into KEY=VALUE entries, sorted.
func envList(field string, env map[string]string) ([]string, error) {
	out := make([]string, 0, len(env))
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return nil, errorf(CodeInvalidParams, "invalid params: %q: bad entry %q (a name without '=' or NUL, a value without NUL)", field, k)
		}
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out, nil
}
