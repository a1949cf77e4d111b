package rpc

import (
	"encoding/json"

	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/internal/lossless"
)

// The fs/* handlers map params to the sandbox's control.FS and back. They
// run on the read loop, so the chunks of one file written by successive
// fs/write requests land in the order sent; each call is bounded (one
// chunk, one directory listing of at most control.DefaultFSMaxEntries).

// fsChunk is the most data one fs/read or fs/write carries: 1 MiB, less
// when the message cap could not hold its base64.
func fsChunk(maxMessage int) int64 {
	return max(min(control.DefaultFSMaxChunk, int64(maxMessage-4096)*3/4), 1)
}

// fsParams decodes the params of an fs/* method and finds the file API
// of the sandbox they name.
func fsParams[P any](c *conn, params json.RawMessage) (*control.FS, *P, error) {
	var p P
	if err := decode(params, &p); err != nil {
		return nil, nil, err
	}
	var id struct {
		SandboxID string `json:"sandboxId"`
	}
	json.Unmarshal(params, &id) // decode checked the JSON
	f, err := c.fsOf(id.SandboxID)
	return f, &p, err
}

// fsOf is the file API of the open sandbox id.
func (c *conn) fsOf(id string) (*control.FS, error) {
	if err := required("sandboxId", id); err != nil {
		return nil, err
	}
	c.mu.Lock()
	sb := c.sandboxes[id]
	c.mu.Unlock()
	if sb == nil {
		return nil, errorf(CodeNotFound, "no open sandbox %q (sandbox/open it first)", id)
	}
	select {
	case <-sb.ready:
	default:
		return nil, errorf(CodeNotFound, "sandbox %q is still opening: send fs/* requests after sandbox/open's response", id)
	}
	if sb.cs == nil {
		return nil, errorf(CodeNotFound, "sandbox %q failed to open", id)
	}
	return sb.cs.FS()
}

func (c *conn) fsRead(params json.RawMessage) (any, error) {
	f, p, err := fsParams[FsReadParams](c, params)
	if err != nil {
		return nil, err
	}
	length := fsChunk(c.srv.opts.MaxMessageBytes)
	if p.Length > 0 && p.Length < length {
		length = p.Length
	}
	ch, err := f.Read(lossless.String(p.Path, p.PathBase64), p.Offset, length)
	if err != nil {
		return nil, err
	}
	return &FsReadResult{Data: nonNil(ch.Data), Size: ch.Size, EOF: ch.EOF}, nil
}

func (c *conn) fsWrite(params json.RawMessage) (any, error) {
	f, p, err := fsParams[FsWriteParams](c, params)
	if err != nil {
		return nil, err
	}
	if n := fsChunk(c.srv.opts.MaxMessageBytes); int64(len(p.Data)) > n {
		return nil, errorf(CodeLimit, "fs/write: %d bytes of data, over limits.maxFsChunkBytes (%d): write the file in chunks (the first replaces it, the next ones append)", len(p.Data), n)
	}
	m := control.WriteMode{Append: p.Append}
	if p.Offset != nil {
		m.At, m.Offset = true, *p.Offset
	}
	if err := f.Write(lossless.String(p.Path, p.PathBase64), p.Data, m); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

func (c *conn) fsList(params json.RawMessage) (any, error) {
	f, p, err := fsParams[FsPathParams](c, params)
	if err != nil {
		return nil, err
	}
	path := p.ExactPath()
	if path == "" {
		path = "."
	}
	ents, more, err := f.List(path)
	if err != nil {
		return nil, err
	}
	out := &FsListResult{Entries: make([]FsEntry, 0, len(ents)), Truncated: more}
	for _, e := range ents {
		out.Entries = append(out.Entries, fsEntry(e))
	}
	return out, nil
}

func (c *conn) fsStat(params json.RawMessage) (any, error) {
	f, p, err := fsParams[FsPathParams](c, params)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat(p.ExactPath())
	if err != nil {
		return nil, err
	}
	e := fsEntry(*fi)
	return &e, nil
}

func (c *conn) fsRemove(params json.RawMessage) (any, error) {
	f, p, err := fsParams[FsRemoveParams](c, params)
	if err != nil {
		return nil, err
	}
	if err := f.Remove(lossless.String(p.Path, p.PathBase64), p.Recursive, p.Force); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

func (c *conn) fsMkdir(params json.RawMessage) (any, error) {
	f, p, err := fsParams[FsMkdirParams](c, params)
	if err != nil {
		return nil, err
	}
	if err := f.Mkdir(lossless.String(p.Path, p.PathBase64), p.Recursive); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

func (c *conn) fsRename(params json.RawMessage) (any, error) {
	f, p, err := fsParams[FsRenameParams](c, params)
	if err != nil {
		return nil, err
	}
	if err := f.Rename(lossless.String(p.Path, p.PathBase64), lossless.String(p.NewPath, p.NewPathBase64), p.Overwrite); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// fsEntry is the wire form of one entry.
func fsEntry(fi control.FileInfo) FsEntry {
	e := FsEntry{FileName: fi.Name, FileNameBase64: lossless.Bytes(fi.Name), Type: fi.Type,
		IsFile: fi.Type == "file", IsDirectory: fi.Type == "directory", IsSymlink: fi.Type == "symlink",
		Size: fi.Size, Mode: int64(fi.Mode.Perm())}
	if !fi.ModTime.IsZero() {
		e.ModifiedAtMs = fi.ModTime.UnixMilli()
	}
	return e
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
