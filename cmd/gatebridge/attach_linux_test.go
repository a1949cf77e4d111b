package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/internal/config"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/agent"
)

// sandboxUID is the pod sandbox's user in deploy/k8s.
const sandboxUID = 65532

// sharedDir is a shared directory as a pod's emptyDir is: root's, 0777,
// not sticky.
func sharedDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the attack is a sandbox user against a root sidecar")
	}
	dir := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	// t.TempDir's own directories are 0700: let the sandbox's user reach it.
	for d := filepath.Dir(dir); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	return dir
}

// asSandbox runs argv as the sandbox's user.
func asSandbox(argv ...string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: sandboxUID, Gid: sandboxUID}}
	return cmd.Run()
}

// The sandbox writes the shared directory. Once `serve --attach` holds it,
// the sandbox cannot rename gatebridge's sessions/ or agent/ to put its
// own in their place (then every new session would be made, by root, in
// a directory the sandbox controls).
func TestAttachSandboxCannotSwapEntries(t *testing.T) {
	dir := sharedDir(t)
	closeFn, err := attach(&rpc.Options{}, dir, false, config.AttachConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if fi, _ := os.Stat(dir); fi.Mode()&os.ModeSticky == 0 {
		t.Errorf("shared directory mode %v: not sticky", fi.Mode())
	}
	for _, name := range []string{agent.AttachedSessionsDir, agent.AttachedAgentDir} {
		if err := asSandbox("mv", filepath.Join(dir, name), filepath.Join(dir, "old-"+name)); err == nil {
			t.Errorf("the sandbox's user renamed %s", name)
		}
	}
}

// What the sandbox planted at those names before gatebridge started is
// refused, not used: a link (followed, it would make root create and
// chmod directories wherever it points) and a directory of its own.
func TestAttachRefusesPlantedEntries(t *testing.T) {
	for _, name := range []string{agent.AttachedSessionsDir, agent.AttachedAgentDir} {
		t.Run(name+"/link", func(t *testing.T) {
			dir := sharedDir(t)
			target := t.TempDir()
			if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
			if _, err := attach(&rpc.Options{}, dir, false, config.AttachConfig{}); err == nil || !strings.Contains(err.Error(), "not a directory") {
				t.Errorf("attach with %s a link: %v", name, err)
			}
			if ents, _ := os.ReadDir(target); len(ents) > 0 {
				t.Errorf("attach wrote through the link: %v", ents)
			}
		})
		t.Run(name+"/dir", func(t *testing.T) {
			dir := sharedDir(t)
			if err := asSandbox("mkdir", filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
			if _, err := attach(&rpc.Options{}, dir, false, config.AttachConfig{}); err == nil || !strings.Contains(err.Error(), "owned by uid 65532") {
				t.Errorf("attach with %s the sandbox's: %v", name, err)
			}
		})
	}
}

// A shared directory others may write that gatebridge cannot make sticky
// (it is another user's) is refused.
func TestAttachRefusesForeignWritableDir(t *testing.T) {
	dir := sharedDir(t)
	if err := os.Chown(dir, sandboxUID, sandboxUID); err != nil {
		t.Fatal(err)
	}
	if _, err := attach(&rpc.Options{}, dir, false, config.AttachConfig{}); err == nil || !strings.Contains(err.Error(), "not sticky") {
		t.Errorf("attach to a 0777 directory of uid %d: %v", sandboxUID, err)
	}
}

// TestAttachRefusesUndeclaredWorkspace: the declaration names where the
// pod mounts the protected paths read-only (/w/.git). A client opening a
// writable workspace below it (/w/sub, a repository cloned into the pod's
// workspace, with a .git of its own) is refused at sandbox/open; the
// declared workspace, and any read-only one, open.
func TestAttachRefusesUndeclaredWorkspace(t *testing.T) {
	dir := t.TempDir()
	var opened []string
	opts := rpc.Options{Options: control.Options{
		Process: sandbox.Spec{ProtectedPaths: []string{".git"}},
		Gates: func(workspace, inside string, writable bool) (*gates.Registry, map[string]string, error) {
			opened = append(opened, inside)
			return nil, nil, nil
		},
	}}
	closeFn, err := attach(&opts, dir, false, config.AttachConfig{ReadOnlyPaths: []string{"/w/.git"}})
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	_, _, err = opts.Gates("/w/sub", "/w/sub", true)
	var re *rpc.Error
	if !errors.As(err, &re) || re.Code != rpc.CodeInvalidParams || !strings.Contains(re.Message, `"workspace" /w/sub: protected path .git (sandbox.protected_paths) is not declared read-only`) {
		t.Fatalf("writable /w/sub: %v, want a refusal", err)
	}
	if h, _ := re.Data.(map[string]string); !strings.Contains(h["hint"], "open a workspace whose protected paths are declared (/w)") {
		t.Errorf("hint %q", h["hint"])
	}
	for _, ok := range []struct {
		ws       string
		writable bool
	}{{"/w", true}, {"/w/sub", false}} {
		if _, _, err := opts.Gates(ok.ws, ok.ws, ok.writable); err != nil {
			t.Errorf("%s (writable %v): %v", ok.ws, ok.writable, err)
		}
	}
	if !slices.Equal(opened, []string{"/w", "/w/sub"}) {
		t.Errorf("gates made for %q, want the two accepted workspaces only", opened)
	}

	// Declared, but .git is a link (left in a persistent workspace): the
	// pod's read-only mount shows its target, which the sandbox writes
	// where it lies.
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("x", filepath.Join(ws, ".git")); err != nil {
		t.Fatal(err)
	}
	opts.Gates = func(string, string, bool) (*gates.Registry, map[string]string, error) { return nil, nil, nil }
	closeLinked, err := attach(&opts, t.TempDir(), false, config.AttachConfig{ReadOnlyPaths: []string{ws + "/.git"}})
	if err != nil {
		t.Fatal(err)
	}
	defer closeLinked()
	if _, _, err := opts.Gates(ws, ws, true); err == nil || !strings.Contains(err.Error(), "is a symbolic link") {
		t.Errorf("writable %s with .git a link: %v, want a refusal", ws, err)
	}
}
