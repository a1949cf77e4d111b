package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sandbox cp moves a file into and out of a persistent sandbox's
// workspace with the file API's rules: a link in the workspace pointing
// out is not followed, a protected path is neither read nor written.
func TestSandboxCp(t *testing.T) {
	needBackend(t, "docker")
	ws := workspace(t)
	must(t, os.Mkdir(filepath.Join(ws, ".git"), 0o755))
	must(t, os.WriteFile(filepath.Join(ws, ".git", "config"), []byte("[core]\n"), 0o644))
	must(t, os.Symlink("/etc", filepath.Join(ws, "x")))
	name := randName("cp")
	if out := gbRaw(t, ws, nil, nil, 0, "sandbox", "start", "--writable-workspace", name); out.Code != 0 {
		t.Fatalf("sandbox start: %s", out.Stderr)
	}
	t.Cleanup(func() { gbRaw(t, ws, nil, nil, 0, "sandbox", "stop", name) })
	local := filepath.Join(t.TempDir(), "in.txt")
	must(t, os.WriteFile(local, []byte("hello\x00\n"), 0o644))
	if out := gbRaw(t, ws, nil, nil, 0, "sandbox", "cp", local, name+":sub/"); out.Code != 0 {
		t.Fatalf("cp in: %d %s", out.Code, out.Stderr)
	}
	if out := gbRaw(t, ws, nil, nil, 0, "sandbox", "exec", name, "--", "cat", "sub/in.txt"); out.Stdout != "hello\x00\n" {
		t.Fatalf("the sandbox sees %q (%s)", out.Stdout, out.Stderr)
	}
	back := filepath.Join(t.TempDir(), "back.txt")
	if out := gbRaw(t, ws, nil, nil, 0, "sandbox", "cp", name+":/workspace/sub/in.txt", back); out.Code != 0 {
		t.Fatalf("cp out: %d %s", out.Code, out.Stderr)
	}
	if b, err := os.ReadFile(back); err != nil || string(b) != "hello\x00\n" {
		t.Fatalf("copied out %q (%v)", b, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{name + ":x/passwd", "-"}, "symbolic link"},
		{[]string{name + ":.git/config", "-"}, "protected"},
		{[]string{local, name + ":.git/config"}, "protected"},
		{[]string{name + ":../../etc/passwd", "-"}, "leaves the workspace"},
	} {
		out := gbRaw(t, ws, nil, nil, 0, append([]string{"sandbox", "cp"}, tc.args...)...)
		if out.Code != 125 || !strings.Contains(out.Stderr, tc.want) || strings.Contains(out.Stdout, "root:") {
			t.Errorf("cp %q: exit %d, stdout %q, stderr %q; want 125 and %q", tc.args, out.Code, out.Stdout, out.Stderr, tc.want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); string(b) != "[core]\n" {
		t.Fatalf(".git/config is now %q", b)
	}
}
