package gates

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitRepo makes a repository at dir whose core.fsmonitor, if git ever
// runs it, creates the file marker: what a sandbox plants.
func gitRepo(t *testing.T, dir, marker string) {
	t.Helper()
	hook := filepath.Join(dir, "fsmonitor.sh")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hook, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q", dir}, {"-C", dir, "config", "core.fsmonitor", hook}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: ", err)
	}
}

// A host gate (isolate: {host: true}) running git in a directory of the
// workspace: the sandbox plants a nested repository (sub/.git, a
// .git file pointing at a repository of its own) whose core.fsmonitor
// is a program of its choice. Git on the host ran it (with the gate's
// secrets in its environment); now git uses the workspace's protected
// .git, whatever lies below it.
func TestHostGateNestedRepository(t *testing.T) {
	needGit(t)
	ws := t.TempDir()
	marker := filepath.Join(t.TempDir(), "ran")
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	gitRepo(t, filepath.Join(ws, "sub"), marker)       // planted: a nested repository
	gitRepo(t, filepath.Join(ws, "elsewhere"), marker) // planted: the target of a .git file
	os.MkdirAll(filepath.Join(ws, "other"), 0o755)
	os.WriteFile(filepath.Join(ws, "other", ".git"), []byte("gitdir: "+filepath.Join(ws, "elsewhere", ".git")+"\n"), 0o644)
	for _, dir := range []string{"sub", "other"} {
		g := mustCommand(t, CommandSpec{Name: "git_status", Command: []string{"git", "status", "--porcelain"},
			Dir: filepath.Join(ws, dir), Untrusted: []string{ws}, Workspace: ws, Protected: []string{".git"}})
		r := callGate(t, g, nil)
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%s: git ran the sandbox's core.fsmonitor on the host (exit %d, %s)", dir, r.code, r.errOut)
		}
		if r.code != 0 || !strings.Contains(r.out, "?? ") {
			t.Errorf("%s: want git status of the workspace's own repository, got exit %d, %q %q", dir, r.code, r.out, r.errOut)
		}
	}
}

// With no protected .git (protected_paths: []), the workspace's own
// .git is the sandbox's to write: a host gate's git gets no repository.
func TestHostGateUnprotectedRepository(t *testing.T) {
	needGit(t)
	ws := t.TempDir()
	marker := filepath.Join(t.TempDir(), "ran")
	gitRepo(t, ws, marker)
	g := mustCommand(t, CommandSpec{Name: "git_status", Command: []string{"git", "status"},
		Dir: ws, Untrusted: []string{ws}, Workspace: ws})
	r := callGate(t, g, nil)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("git ran the sandbox's core.fsmonitor on the host")
	}
	if r.code == 0 || !strings.Contains(r.errOut, "not a git repository") {
		t.Errorf("want git to find no repository: exit %d, %q", r.code, r.errOut)
	}
	// A gate whose env names its repository keeps it (the config's choice).
	g = mustCommand(t, CommandSpec{Name: "git_status", Command: []string{"git", "status", "--porcelain"},
		Dir: ws, Untrusted: []string{ws}, Workspace: ws, Env: []string{"GIT_DIR=" + filepath.Join(ws, ".git"), "GIT_CONFIG_COUNT=1",
			"GIT_CONFIG_KEY_0=core.fsmonitor", "GIT_CONFIG_VALUE_0=false"}})
	if r := callGate(t, g, nil); r.code != 0 {
		t.Errorf("GIT_DIR in env: exit %d, %q", r.code, r.errOut)
	}
}

// The sandbox swaps a host gate's dir (in the workspace) for a link to a
// directory outside: the call is refused, it does not run there.
func TestHostGateDirSwappedForLink(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	sub := filepath.Join(ws, "sub")
	os.Mkdir(sub, 0o755)
	g := mustCommand(t, CommandSpec{Name: "where", Command: []string{"/bin/pwd", "-P"}, Dir: sub, Untrusted: []string{ws}})
	if r := callGate(t, g, nil); r.code != 0 || strings.TrimSpace(r.out) != sub {
		t.Fatalf("before the swap: exit %d, %q %q", r.code, r.out, r.errOut)
	}
	os.Remove(sub)
	if err := os.Symlink(outside, sub); err != nil {
		t.Fatal(err)
	}
	r := callGate(t, g, nil)
	if strings.Contains(r.out, outside) || r.err == nil || !strings.Contains(r.err.Error(), "link") {
		t.Errorf("after the swap: exit %d, %q, %v; want a refusal, not a run in %s", r.code, r.out, r.err, outside)
	}
}

// Between the check and the child's chdir the sandbox can swap the
// directory again: the child starts in the directory that was opened
// (/proc/self/fd/N), not in whatever the path leads to by then.
func TestHostCwdOpenedNotRenamed(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	ws, _ = filepath.EvalSymlinks(ws)
	os.Mkdir(filepath.Join(ws, "sub"), 0o755)
	c := &hostCwd{root: ws, rel: "sub"}
	dir, release, err := c.open()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	os.Rename(filepath.Join(ws, "sub"), filepath.Join(ws, "moved"))
	os.Symlink(outside, filepath.Join(ws, "sub"))
	cmd := exec.Command("/bin/pwd", "-P")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != filepath.Join(ws, "moved") {
		t.Errorf("child started in %q (%v), want the opened directory %s", out, err, filepath.Join(ws, "moved"))
	}
}

// runOnHost is an Isolator that runs the program as it is: what the
// gate hands it (its env) is what is checked.
type runOnHost struct{}

func (runOnHost) Isolate(context.Context, *exec.Cmd, IsolateSpec) (func(), error) {
	return func() {}, nil
}

// An isolated gate runs git in a nested repository the sandbox planted:
// its core.fsmonitor ran in the gate's sandbox, with the gate's secrets
// in its environment, free to encode them into the gate's output. The
// isolated gate's git is pinned as a host gate's is.
func TestIsolatedGateNestedRepository(t *testing.T) {
	needGit(t)
	ws := t.TempDir()
	marker := filepath.Join(t.TempDir(), "ran")
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	gitRepo(t, filepath.Join(ws, "sub"), marker)
	gs, err := commandKind.New(context.Background(), CommandSpec{Name: "git_status", Command: []string{"git", "status", "--porcelain"},
		Dir: filepath.Join(ws, "sub")}, Env{Workspace: ws, Untrusted: []string{ws}, Protected: []string{".git"}, Isolator: runOnHost{}})
	if err != nil {
		t.Fatal(err)
	}
	r := callGate(t, gs[0], nil)
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("git ran the sandbox's core.fsmonitor (exit %d, %s)", r.code, r.errOut)
	}
	if r.code != 0 || !strings.Contains(r.out, "?? ") {
		t.Errorf("want git status of the workspace's own repository, got exit %d, %q %q", r.code, r.out, r.errOut)
	}
}
