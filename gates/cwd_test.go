//go:build unix

package gates

import (
	"context"
	"path/filepath"
	"testing"
)

// Relative paths start at the caller's working directory, under any name
// the sandbox has for the workspace (its host path or its mount point);
// "..": fine inside the workspace, refused past it; a working directory
// outside the workspace refuses relative paths and says what to do.
func TestCwdResolvesRelativePaths(t *testing.T) {
	ws, g := fixture(t, Options{SandboxRoot: "/workspace", WritableRoot: ""})
	ctx := context.Background()
	for _, tc := range []struct {
		name, cwd, gate string
		args            []string
		code            int
		out, err        string
	}{
		{"read in sub", "/workspace/sub", "read_file", []string{"b.go"}, 0, "package b\n\nfunc Needle() {}\n", ""},
		{"read in sub, host path", filepath.Join(ws, "sub"), "read_file", []string{"b.go"}, 0, "package b\n\nfunc Needle() {}\n", ""},
		{"read up", "/workspace/sub/deep", "read_file", []string{"../../a.txt"}, 0, "one\ntwo needle\nthree\n", ""},
		{"climb out", "/workspace/sub", "read_file", []string{"../../secret.txt"}, ExitDenied, "", "outside the workspace"},
		{"absolute still works", "/workspace/sub", "read_file", []string{"/workspace/a.txt"}, 0, "one\ntwo needle\nthree\n", ""},
		{"cwd outside", "/tmp", "read_file", []string{"a.txt"}, ExitDenied, "", `working directory "/tmp" is outside the workspace: give a path under /workspace`},
		{"cwd outside, absolute ok", "/tmp", "read_file", []string{"/workspace/a.txt"}, 0, "one\ntwo needle\nthree\n", ""},
		{"cwd climbing", "/workspace/../etc", "read_file", []string{"passwd"}, ExitDenied, "", "outside the workspace"},
		{"cwd relative", "sub", "read_file", []string{"b.go"}, ExitDenied, "", "outside the workspace"},
		{"no cwd: root", "", "read_file", []string{"a.txt"}, 0, "one\ntwo needle\nthree\n", ""},
		{"list cwd", "/workspace/sub", "list_dir", nil, 0, "b.go\ndeep/\n", ""},
		{"list root from root", "/workspace", "list_dir", []string{"sub/deep"}, 0, "c.txt\n", ""},
		{"search cwd, paths from cwd", "/workspace/sub", "search", []string{"needle"}, 0, "deep/c.txt:1:needle needle\n", ""},
		{"search up, paths from cwd", "/workspace/sub/deep", "search", []string{"Needle", ".."}, 0, "../b.go:3:func Needle() {}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			callGateIn(t, ctx, tc.cwd, g[tc.gate], nil, tc.args...).check(t, tc.code, tc.out, tc.err)
		})
	}
}

func TestCwdWriteFile(t *testing.T) {
	ws, _ := fixture(t, Options{SandboxRoot: "/workspace"})
	_, g2 := fixture(t, Options{Root: ws, SandboxRoot: "/workspace", WritableRoot: ws, SandboxWritableRoot: "/workspace"})
	ctx := context.Background()
	callGateIn(t, ctx, "/workspace/sub", g2["write_file"], []byte("hi\n"), "new.txt").check(t, 0, "", "")
	callGateIn(t, ctx, "/workspace/sub", g2["read_file"], nil, filepath.Join(ws, "sub", "new.txt")).check(t, 0, "hi\n", "")
	callGateIn(t, ctx, "/var/tmp", g2["write_file"], []byte("x"), "new.txt").check(t, ExitDenied, "", "outside the workspace")
}
