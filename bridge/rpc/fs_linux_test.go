package rpc_test

import (
	. "github.com/gatebridge/gatebridge/bridge/rpc"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The fs/* methods over the protocol: contents and names that are not
// UTF-8 round-trip through their base64 siblings, and the file API's
// refusals arrive as -32602 with the reason.
func TestFsMethods(t *testing.T) {
	for _, backend := range testBackends(t) {
		t.Run(backend, func(t *testing.T) {
			opts := testOptions(t)
			opts.Process.ProtectedPaths = []string{".git"}
			c := newClient(t, opts)
			ws, res := c.openSandbox("sb", backend, true)
			must := func(method string, params any, out any) { t.Helper(); c.Call(method, params, out) }
			name := "d/caf\xff.bin"
			data := []byte{0, 1, 0xff, '\n'}
			must(MethodFsWrite, FsWriteParams{SandboxID: "sb", Path: "d/caf\ufffd.bin", PathBase64: []byte(name), Data: data}, nil)
			off := int64(4)
			must(MethodFsWrite, FsWriteParams{SandboxID: "sb", Path: res.WorkspaceInside + "/d/caf\ufffd.bin", PathBase64: []byte(res.WorkspaceInside + "/" + name), Data: []byte("tail"), Offset: &off}, nil)
			if b, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(b) != "\x00\x01\xff\ntail" {
				t.Fatalf("file holds %q (%v)", b, err)
			}
			var rd FsReadResult
			must(MethodFsRead, FsReadParams{SandboxID: "sb", Path: "x", PathBase64: []byte(name), Offset: 2, Length: 3}, &rd)
			if string(rd.Data) != "\xff\nt" || rd.Size != 8 || rd.EOF {
				t.Fatalf("fs/read %+v", rd)
			}
			var ls FsListResult
			must(MethodFsList, FsPathParams{SandboxID: "sb", Path: "d"}, &ls)
			if len(ls.Entries) != 1 || ls.Entries[0].ExactFileName() != "caf\xff.bin" || !ls.Entries[0].IsFile || ls.Entries[0].Size != 8 {
				t.Fatalf("fs/list %+v", ls)
			}
			var st FsEntry
			must(MethodFsStat, FsPathParams{SandboxID: "sb", Path: "d"}, &st)
			if !st.IsDirectory || st.Type != "directory" {
				t.Fatalf("fs/stat %+v", st)
			}
			must(MethodFsMkdir, FsMkdirParams{SandboxID: "sb", Path: "e/f", Recursive: true}, nil)
			must(MethodFsRename, FsRenameParams{SandboxID: "sb", Path: "x", PathBase64: []byte(name), NewPath: "e/f/g"}, nil)
			must(MethodFsRemove, FsRemoveParams{SandboxID: "sb", Path: "e", Recursive: true}, nil)
			if _, err := os.Lstat(filepath.Join(ws, "e")); !os.IsNotExist(err) {
				t.Fatalf("e still there: %v", err)
			}

			if err := os.Symlink("/etc", filepath.Join(ws, "x")); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				method string
				params any
				want   string
			}{
				{MethodFsRead, FsReadParams{SandboxID: "sb", Path: "x/passwd"}, "symbolic link"},
				{MethodFsRead, FsReadParams{SandboxID: "sb", Path: "../etc/passwd"}, "leaves the workspace"},
				{MethodFsRead, FsReadParams{SandboxID: "sb", Path: "/etc/passwd"}, "outside the workspace"},
				{MethodFsWrite, FsWriteParams{SandboxID: "sb", Path: ".git/config", Data: []byte("x")}, "protected"},
				{MethodFsWrite, FsWriteParams{SandboxID: "sb", Path: "a", Data: []byte("x"), Append: true, Offset: &off}, "not both"},
			} {
				e := c.CallErr(tc.method, tc.params)
				if e == nil || e.Code != CodeInvalidParams || !strings.Contains(e.Message, tc.want) {
					t.Errorf("%s %+v: error %+v, want -32602 holding %q", tc.method, tc.params, e, tc.want)
				}
			}
			if e := c.CallErr(MethodFsRead, FsReadParams{SandboxID: "nosuch", Path: "a"}); e == nil || e.Code != CodeNotFound {
				t.Errorf("unknown sandbox: %+v", e)
			}
			if e := c.CallErr(MethodFsWrite, FsWriteParams{SandboxID: "sb", Path: "big", Data: make([]byte, 2<<20)}); e == nil || e.Code != CodeLimit {
				t.Errorf("a chunk over maxFsChunkBytes: %+v", e)
			}
		})
	}
}

func TestFsReadOnlyWorkspace(t *testing.T) {
	c := newClient(t, testOptions(t))
	ws, _ := c.openSandbox("ro", "local", false)
	if err := os.WriteFile(filepath.Join(ws, "a"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := c.CallErr(MethodFsWrite, FsWriteParams{SandboxID: "ro", Path: "a", Data: []byte("x")})
	if e == nil || e.Code != CodeInvalidParams || !strings.Contains(e.Message, "read-only") || !strings.Contains(e.Hint(), "writable") {
		t.Fatalf("write in a read-only workspace: %+v", e)
	}
	var rd FsReadResult
	c.Call(MethodFsRead, FsReadParams{SandboxID: "ro", Path: "a"}, &rd)
	if string(rd.Data) != "a" || !rd.EOF {
		t.Fatalf("read %+v", rd)
	}
}
