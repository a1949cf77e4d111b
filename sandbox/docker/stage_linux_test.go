package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox"
)

// The attack of two sandboxes writing one workspace: between the checks
// of a run's protected paths (no link on the way) and the engine's mount,
// the other sandbox exchanges the parent of a nested protected path
// (gen/ of gen/hooks, bound read-write onto itself so that it cannot be
// renamed) for a link to a host directory. The engine mounted by path, so
// the command got that directory read-write at /workspace/gen and wrote
// into it. The engine must mount what gatebridge checked: the run fails,
// or the command writes into the real gen/, never into the host
// directory. (bwrap's is sandbox.TestBwrapProtectedSwappedAfterCheck.)
func TestProtectedSwappedAfterCheck(t *testing.T) {
	b, _ := newBackend(t, Config{})
	outside, err := os.MkdirTemp("/tmp", "gb-host-dir-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	os.Chmod(outside, 0o777)
	// The engine checks that each source exists at create: the attacker
	// gives its directory a hooks/ too.
	if err := os.Mkdir(filepath.Join(outside, "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, persistent := range []bool{false, true} {
		name := map[bool]string{false: "per command", true: "persistent"}[persistent]
		t.Run(name, func(t *testing.T) {
			swapped := false
			testHookBeforeCreate = func(ws string) {
				if err := os.Rename(filepath.Join(ws, "gen"), filepath.Join(ws, "gen.real")); err != nil {
					t.Error(err)
				}
				if err := os.Symlink(outside, filepath.Join(ws, "gen")); err != nil {
					t.Error(err)
				}
				swapped = true
			}
			defer func() { testHookBeforeCreate = nil }()
			script := `echo pwned > /workspace/gen/pwned 2>/dev/null && echo wrote; ls /workspace/gen; exit 0`
			var res *sandbox.Result
			var ws string
			if persistent {
				ws = filepath.Join(t.TempDir(), "ws")
				os.Chmod(filepath.Dir(ws), 0o755)
				os.MkdirAll(filepath.Join(ws, "gen", "hooks"), 0o777)
				os.Chmod(ws, 0o777)
				os.Chmod(filepath.Join(ws, "gen"), 0o777)
				name := fmt.Sprintf("test-swap-%d-%d", os.Getpid(), time.Now().UnixNano()%1e9)
				root := t.TempDir()
				os.Chmod(root, 0o755)
				sb, err := b.Start(context.Background(), StartOptions{Name: name, SessionsRoot: root, Workspace: ws,
					WorkspaceWritable: true, ProtectedPaths: []string{"gen/hooks"}})
				if err != nil {
					t.Logf("start: %v", err) // failing closed is fine
				} else {
					t.Cleanup(func() { _ = b.Stop(context.Background(), name) })
					res, err = runIn(t, sb, context.Background(), script, withSpec(func(s *sandbox.Spec) {
						s.Workspace, s.WorkspaceWritable = ws, true
					}))
					if err != nil {
						t.Logf("run: %v", err)
					}
				}
			} else {
				var err error
				res, err = runErr(t, b, context.Background(), script, withSpec(func(s *sandbox.Spec) {
					ws = s.Workspace
					s.WorkspaceWritable = true
					s.ProtectedPaths = []string{"gen/hooks"}
					os.Chmod(ws, 0o777)
					os.MkdirAll(filepath.Join(ws, "gen", "hooks"), 0o777)
					os.Chmod(filepath.Join(ws, "gen"), 0o777)
				}))
				if err != nil {
					t.Logf("run: %v", err) // failing closed is fine
				}
			}
			if !swapped {
				t.Fatal("the hook did not run: the test did not attack")
			}
			if res != nil {
				t.Logf("stdout %q stderr %q", res.Stdout, res.Stderr)
			}
			if _, err := os.Lstat(filepath.Join(outside, "pwned")); err == nil {
				os.Remove(filepath.Join(outside, "pwned"))
				t.Errorf("the command wrote into the host directory %s", outside)
			}
			// Where the engine can mount what gatebridge opened, the run
			// goes on in the real gen/ (moved to gen.real by the swap).
			if b.canStage() {
				if _, err := os.Lstat(filepath.Join(ws, "gen.real", "pwned")); err != nil {
					t.Errorf("the command did not write into the real gen/: %v", err)
				}
			}
			if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(mi), "gatebridge-stage-") {
				t.Errorf("staging mounts left:\n%s", mi)
			}
		})
	}
}
