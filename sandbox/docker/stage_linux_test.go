package docker

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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

// stageChildEnv, set to "PARENT\nWORKSPACE", makes the test binary a
// gatebridge that stages gen/hooks of WORKSPACE in PARENT, prints the
// staging directory and waits to be killed (TestStagingLeftByKilledGatebridge).
const stageChildEnv = "GATEBRIDGE_TEST_STAGE_CHILD"

func init() {
	v, ok := os.LookupEnv(stageChildEnv)
	if !ok {
		return
	}
	parent, ws, _ := strings.Cut(v, "\n")
	ps, err := stagingPaths(ws)
	if err == nil {
		testHookStaged = func(dir string) { fmt.Println("staged", dir) }
		_, _, err = stage([]string{parent}, ws, ps)
	}
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	select {} // killed here, between staging and release
}

// stagingPaths are the protected paths of ws the staging tests use:
// gen/hooks, whose parent gen/ and itself are staged.
func stagingPaths(ws string) ([]sandbox.Protected, error) {
	ps, err := sandbox.ProtectedPaths("docker", &sandbox.Spec{Workspace: ws, WorkspaceWritable: true, ProtectedPaths: []string{"gen/hooks"}})
	if err != nil {
		return nil, err
	}
	return ps, sandbox.PrepareProtected("docker", ps)
}

// mountsUnder lists the mount points under dir (of /proc/self/mountinfo).
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

// A gatebridge killed between staging its protected paths (bind mounts
// of workspace directories under /run/gatebridge-stage-*) and its
// container's start left the mounts there for good: nothing removed
// them. Here a child process stages, is killed with SIGKILL, and prune
// must unmount and remove its staging directory, leaving the workspace's
// files in place; a live gatebridge's staging, a young unlocked one,
// another user's, a link and a directory holding a file are left.
func TestStagingLeftByKilledGatebridge(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: staging mounts")
	}
	parent := t.TempDir()
	ws := filepath.Join(t.TempDir(), "ws")
	for _, f := range []string{"gen/keep", "gen/hooks/keep"} {
		if err := os.MkdirAll(filepath.Join(ws, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, f), []byte("mine\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		// Whatever the test left mounted, so that the temp dirs go.
		for _, m := range mountsUnder(t, parent) {
			unix.Unmount(m, unix.MNT_DETACH)
		}
	})

	// The crash.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(exe, "-test.run=^$")
	child.Env = append(os.Environ(), stageChildEnv+"="+parent+"\n"+ws)
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	dead, ok := strings.CutPrefix(strings.TrimSpace(line), "staged ")
	if !ok {
		child.Process.Kill()
		child.Wait()
		t.Fatalf("the child did not stage: %q", line)
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	child.Wait()
	if m := mountsUnder(t, dead); len(m) != 2 {
		t.Fatalf("the killed child's staging mounts: %q, want 2 (the test did not crash it mid-staging)", m)
	}

	// A live gatebridge's, and what is not a dead gatebridge's.
	_, release, err := stage([]string{parent}, ws, mustPaths(t, ws))
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	live := ""
	for _, m := range mountsUnder(t, parent) {
		if !strings.HasPrefix(m, dead+"/") {
			live = filepath.Dir(m)
		}
	}
	if live == "" {
		t.Fatal("the live staging has no mounts")
	}
	young := filepath.Join(parent, stagePrefix+"young")
	other := filepath.Join(parent, stagePrefix+"other")
	full := filepath.Join(parent, stagePrefix+"full")
	link := filepath.Join(parent, stagePrefix+"link")
	target := t.TempDir()
	for _, d := range []string{young, other, full, filepath.Join(full, "0"), filepath.Join(target, "0")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(target, 0o700)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(full, "0", "file"), []byte("x"), 0o600))
	must(os.Chown(other, 4242, 4242))
	must(os.Symlink(target, link))
	old := time.Now().Add(-time.Hour)
	for _, d := range []string{other, full, link} {
		must(os.Chtimes(d, old, old))
	}

	removed, failed := pruneStaging([]string{parent}, time.Minute/2)
	// The killed child's directory and the young one are a second old:
	// under the grace, they stay.
	if len(removed) != 0 || len(failed) != 1 || failed[0].Path != full {
		t.Fatalf("within the grace: removed %q, failed %v", removed, failed)
	}
	removed, failed = pruneStaging([]string{parent}, 0)
	if len(removed) != 2 || !slices.Contains(removed, dead) || !slices.Contains(removed, young) {
		t.Errorf("removed %q, want the killed child's %s and the unlocked %s", removed, dead, young)
	}
	if len(failed) != 1 || failed[0].Path != full || !strings.Contains(failed[0].Error(), "0: remove: directory not empty") {
		t.Errorf("failed %v, want %s (a directory that is no mount point and not empty)", failed, full)
	}
	if m := mountsUnder(t, dead); len(m) != 0 {
		t.Errorf("the killed child's mounts are still there: %q", m)
	}
	if _, err := os.Lstat(dead); !os.IsNotExist(err) {
		t.Errorf("the killed child's staging directory: %v", err)
	}
	if m := mountsUnder(t, live); len(m) != 2 {
		t.Errorf("the live staging's mounts: %q, want 2", m)
	}
	for _, p := range []string{other, link, filepath.Join(full, "0", "file"), filepath.Join(target, "0"),
		filepath.Join(ws, "gen/keep"), filepath.Join(ws, "gen/hooks/keep")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	release()
	if _, err := os.Lstat(live); !os.IsNotExist(err) {
		t.Errorf("the live staging after its release: %v", err)
	}
}

func mustPaths(t *testing.T, ws string) []sandbox.Protected {
	t.Helper()
	ps, err := stagingPaths(ws)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}
