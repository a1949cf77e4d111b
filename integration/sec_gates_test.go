package integration

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// safeGitLog is the README's git_log gate, on the host (isolate.host):
// these tests show what the argument policy alone refuses; isolation is
// tested on top of it (TestSecIsolated*).
const safeGitLog = `
gates:
  commands:
    - name: git_log
      summary: Show the host repository's history.
      command: [git, log]
      options:
        - {name: -n, value: "[0-9]{1,4}"}
        - {name: --oneline}
        - {name: --stat}
      args:
        - {name: REV, pattern: "[A-Za-z0-9][A-Za-z0-9_./^~-]{0,99}", optional: true}
      end_of_options: --end-of-options
      dir: %s
      timeout: 30s
      isolate: {host: true}
`

// oldGitLog is the README's example before this round: only the first
// argument was checked, so the rest reached git unchecked.
const oldGitLog = `
gates:
  commands:
    - name: git_log
      command: [git, log, --oneline]
      allow_pattern: "^(-[0-9]+)?$"
      dir: %s
      isolate: {host: true}
`

func gitRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("git is required in CI (.ci/run installs it)")
		}
		t.Skip("no git here")
	}
	repo := workspace(t) // readable by an isolated gate's uid too
	for _, args := range [][]string{
		{"init", "-q"},
		{"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "first commit"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	return repo
}

// TestSecCommandGateArgs performs the review's attacks through the git_log
// gate: writing a host file with --output (an authorized_keys line), and
// planting a diff.external in a .gitconfig then running it with
// --ext-diff. Every one must be refused with 126 and leave no file.
func TestSecCommandGateArgs(t *testing.T) {
	repo := gitRepo(t)
	forEachBackend(t, func(t *testing.T, backend string) {
		loot := t.TempDir()
		keys := filepath.Join(loot, "authorized_keys")
		gitconfig := filepath.Join(loot, ".gitconfig")
		script := fmt.Sprintf(`
try() { "$@" >/dev/null 2>>err.txt; echo "$?"; }
try git_log -1 --output=%[1]s "--format=format:ssh-ed25519 AAAA attacker"
try git_log -n 1 --output %[1]s
try git_log -n 1 "--format=[diff]%%n external = /bin/sh -c 'id > %[2]s.pwn'" --output=%[2]s
try git_log -n 1 -p --ext-diff
try git_log -c core.pager=id HEAD
try git_log -- --output=%[1]s
try git_log -n '1 --output=x'
git_log -n 1 --oneline HEAD
`, keys, gitconfig)
		ws := workspace(t)
		out := gb(t, backend, Run{Dir: ws, Config: fmt.Sprintf(safeGitLog, repo), Command: []string{"sh", "-c", "cd /tmp 2>/dev/null; " + script}})
		lines := strings.Split(strings.TrimSpace(out.Stdout), "\n")
		if len(lines) != 8 {
			t.Fatalf("exit %d, stdout %q, stderr %q", out.Code, out.Stdout, out.Stderr)
		}
		for i, l := range lines[:7] {
			if l != "126" {
				t.Errorf("attack %d: exit %s, want 126", i+1, l)
			}
		}
		if !strings.HasSuffix(lines[7], "first commit") {
			t.Errorf("allowed call printed %q", lines[7])
		}
		for _, f := range []string{keys, gitconfig, gitconfig + ".pwn"} {
			if _, err := os.Lstat(f); err == nil {
				t.Errorf("%s was written on the host", f)
			}
		}
	})
	t.Run("control", func(t *testing.T) {
		// The same attack through a gate that allows --output, on the
		// host: the file is written, so the refusals above are the
		// policy's doing, not a broken setup.
		loot := filepath.Join(t.TempDir(), "authorized_keys")
		cfg := fmt.Sprintf("gates:\n  commands:\n    - name: git_log\n      command: [git, log]\n      options:\n"+
			"        - {name: -n, value: \"[0-9]+\"}\n        - {name: --output, value: \".*\"}\n        - {name: --format, value: \".*\"}\n      dir: %s\n"+
			"      isolate: {host: true}\n", repo)
		out := gb(t, "local", Run{Config: cfg,
			Command: []string{"sh", "-c", fmt.Sprintf(`git_log -n 1 --output=%s "--format=format:ssh-ed25519 AAAA attacker"; echo "exit $?"`, loot)}})
		b, err := os.ReadFile(loot)
		if err != nil || !strings.Contains(string(b), "ssh-ed25519 AAAA attacker") {
			t.Errorf("control attack did not write the file (%v, %q): stdout %q stderr %q", err, b, out.Stdout, out.Stderr)
		}
	})
	t.Run("old config", func(t *testing.T) {
		// The README's old example: allow_pattern now applies to every argument.
		loot := filepath.Join(t.TempDir(), "authorized_keys")
		out := gb(t, "local", Run{Config: fmt.Sprintf(oldGitLog, repo),
			Command: []string{"sh", "-c", fmt.Sprintf(`git_log -1 --output=%s "--format=ssh-ed25519 AAAA"; echo "exit $?"`, loot)}})
		if !strings.Contains(out.Stdout, "exit 126") || !strings.Contains(out.Stderr, `argument "--output=`) {
			t.Errorf("stdout %q stderr %q", out.Stdout, out.Stderr)
		}
		if _, err := os.Lstat(loot); err == nil {
			t.Error("old config: --output wrote a host file")
		}
	})
}

// TestSecCommandInWorkspace: a command gate whose program lives where the
// sandbox can write (here the workspace) is a config error, not a host
// program the sandbox can replace.
func TestSecCommandInWorkspace(t *testing.T) {
	ws := workspace(t)
	tool := filepath.Join(ws, "tool.sh")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\necho host\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("gates:\n  commands:\n    - name: tool\n      command: [%s]\n", tool)
	out := gb(t, "local", Run{Dir: ws, Config: cfg, Command: []string{"sh", "-c", "echo x > tool.sh; tool"}})
	if out.Code != 125 || !strings.Contains(out.Stderr, "which the sandbox can write") {
		t.Errorf("exit %d, stderr %q", out.Code, out.Stderr)
	}
	if b, _ := os.ReadFile(tool); string(b) != "#!/bin/sh\necho host\n" {
		t.Errorf("the command ran: tool.sh is %q", b)
	}
}

// TestSecWriteFileProtected: write_file could rewrite .git/config
// (core.fsmonitor) or add .git/hooks/*, which the host runs at its next
// git command. Protected paths are refused with 126.
func TestSecWriteFileProtected(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		ws := workspace(t)
		must(t, os.MkdirAll(filepath.Join(ws, ".git"), 0o755))
		must(t, os.WriteFile(filepath.Join(ws, ".git", "config"), []byte("[core]\n"), 0o644))
		cfg := fmt.Sprintf("gates:\n  writable_root: %s\n", ws)
		script := `for p in .git/config .git/hooks/pre-commit sub/../.git/config sub/.git/hooks/post-checkout; do printf '[core]\n\tfsmonitor = id\n' | write_file "$p"; echo "$?"; done
echo ok | write_file notes.txt; echo "$?"`
		out := gb(t, backend, Run{Dir: ws, Config: cfg, Command: []string{"sh", "-c", script}})
		if out.Stdout != "126\n126\n126\n126\n0\n" || !strings.Contains(out.Stderr, "sandbox.protected_paths") {
			t.Errorf("stdout %q, stderr %q", out.Stdout, out.Stderr)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); string(b) != "[core]\n" {
			t.Errorf(".git/config is %q", b)
		}
		for _, d := range []string{".git/hooks", "sub"} {
			if _, err := os.Lstat(filepath.Join(ws, d)); err == nil {
				t.Errorf("%s was created", d)
			}
		}
	})
}

// TestSecWriteFileSwapRace (issue 26 item 1): the sandbox exchanges sub/
// with a symlink sub -> .git (renameat2 RENAME_EXCHANGE, in a loop) while
// calling write_file sub/config. The host checked the path string, then
// wrote through os.Root, which followed the link: .git/config was
// rewritten within 3-14 calls in every trial. Now the write goes through
// the directory the no-follow walk opened. A bounded number of calls (the
// gates' TestWriteFileSwapRace hits each window deterministically); the
// racer needs python3 inside, which bwrap binds from the host's /usr.
func TestSecWriteFileSwapRace(t *testing.T) {
	needBackend(t, "bwrap")
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3 for the racer")
	}
	ws := workspace(t)
	must(t, os.MkdirAll(filepath.Join(ws, ".git"), 0o755))
	must(t, os.WriteFile(filepath.Join(ws, ".git", "config"), []byte("[core]\n"), 0o644))
	if os.Geteuid() == 0 {
		// The command runs as the workspace's owner: make it one that
		// can write it, not root.
		for _, p := range []string{ws, filepath.Join(ws, ".git"), filepath.Join(ws, ".git", "config")} {
			must(t, os.Chown(p, 54321, 54321))
		}
	}
	cfg := fmt.Sprintf("gates:\n  writable_root: %s\n", ws)
	racer := `import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
os.mkdir("sub"); os.symlink(".git", "lnk")
open("racing", "w").close()
while os.path.exists("racing"):
    if libc.renameat2(-100, b"sub", -100, b"lnk", 2) != 0:
        raise SystemExit("renameat2: " + os.strerror(ctypes.get_errno()))
`
	script := `/usr/bin/python3 -c '` + racer + `' & 
while [ ! -e racing ]; do sleep 0.01; done
ok=0 refused=0
i=0; while [ $i -lt 60 ]; do
  printf '[core]\n\tfsmonitor = touch /tmp/pwned\n' | write_file sub/config 2>err
  c=$?
  case $c in 0) ok=$((ok+1));; 126) refused=$((refused+1));; *) echo "exit $c: $(cat err)";; esac
  i=$((i+1))
done
rm racing err; wait $!; echo "racer $?"
echo "ok=$ok refused=$refused"`
	out := gb(t, "bwrap", Run{Dir: ws, Config: cfg, Args: []string{"--writable-workspace"}, Command: []string{"sh", "-c", script}})
	t.Logf("stdout %q, stderr %q", out.Stdout, out.Stderr)
	if b, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); string(b) != "[core]\n" {
		t.Fatalf("the write landed in .git/config: %q", b)
	}
	if ents, _ := os.ReadDir(filepath.Join(ws, ".git")); len(ents) != 1 {
		t.Errorf(".git holds %v", ents)
	}
	if out.Code != 0 || !strings.Contains(out.Stdout, "racer 0\n") || strings.Contains(out.Stdout, "exit ") {
		t.Errorf("exit %d: the race did not run as planned", out.Code)
	}
}

// TestSecWriteFileOwner (issue 26 item 10): as root, write_file left
// root-owned 0755 directories in a user's workspace, so the sandbox (which
// runs as the workspace's owner) could not write into what write_file had
// just made. Now they belong to the workspace's owner.
func TestSecWriteFileOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only a root host creates files for another user")
	}
	for _, backend := range []string{"bwrap", "docker"} { // local runs the command as root
		t.Run(backend, func(t *testing.T) {
			needBackend(t, backend)
			ws := workspace(t)
			must(t, os.Chown(ws, 54321, 54321))
			cfg := fmt.Sprintf("gates:\n  writable_root: %s\n", ws)
			script := `echo a | write_file sub/dir/f; echo $?; (echo b > sub/dir/g) 2>/dev/null; echo $?; (echo c > sub/dir/f) 2>/dev/null; echo $?`
			out := gb(t, backend, Run{Dir: ws, Config: cfg, Args: []string{"--writable-workspace"}, Command: []string{"sh", "-c", script}})
			if out.Stdout != "0\n0\n0\n" {
				t.Errorf("stdout %q (write_file, then the sandbox writing into and over what it made), stderr %q", out.Stdout, out.Stderr)
			}
			for _, rel := range []string{"sub", "sub/dir", "sub/dir/f", "sub/dir/g"} {
				fi, err := os.Lstat(filepath.Join(ws, rel))
				if err != nil {
					t.Errorf("%s: %v", rel, err)
					continue
				}
				if st := fi.Sys().(*syscall.Stat_t); st.Uid != 54321 || st.Gid != 54321 {
					t.Errorf("%s owned by %d:%d, want the workspace's owner 54321:54321", rel, st.Uid, st.Gid)
				}
			}
		})
	}
}

// TestSecSearchStops: a search that hits its gate timeout inside one long
// line returns 124 within the timeout plus a second, and stops matching:
// gatebridge is idle afterwards (before, the regexp kept two host cores
// busy for 30 s after the 124, and every retry added more).
func TestSecSearchStops(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	ws := workspace(t)
	must(t, os.WriteFile(filepath.Join(ws, "big"), []byte(strings.Repeat("a", 4<<20)), 0o644))
	cfg := filepath.Join(t.TempDir(), "gatebridge.yaml")
	must(t, os.WriteFile(cfg, []byte("bridge:\n  limits:\n    gate_timeout: 1s\ngates:\n  max_search_file_bytes: 8388608\n"), 0o644))
	// Unbounded, '[ab]{500}c' over this line runs ~17 s of CPU.
	script := `s=$(date +%s%N); search '[ab]{500}c' big; c=$?; e=$(date +%s%N); echo "$c $(( (e - s) / 1000000 ))"; sleep 3`
	cmd := exec.Command(binary, "--config", cfg, "run", "--sandbox", "local", "--", "sh", "-c", script)
	cmd.Dir = ws
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	defer cmd.Wait()
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("no result line: %v", err)
	}
	before := procCPU(t, cmd.Process.Pid)
	time.Sleep(2 * time.Second)
	after := procCPU(t, cmd.Process.Pid)
	var code, ms int
	if _, err := fmt.Sscanf(line, "%d %d", &code, &ms); err != nil || code != 124 {
		t.Fatalf("stdout %q: want exit 124 and a duration", line)
	}
	if ms > 2000 {
		t.Errorf("search returned after %d ms with a 1s gate timeout", ms)
	}
	t.Logf("search returned 124 after %d ms; gatebridge then used %v of CPU in 2 s", ms, after-before)
	if after-before > 250*time.Millisecond {
		t.Errorf("gatebridge used %v of CPU in the 2 s after the 124: the search kept running", after-before)
	}
}

// procCPU is the user+system CPU time of pid (all its threads).
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	must(t, err)
	// Fields after the parenthesised command name; utime and stime are
	// fields 14 and 15, in clock ticks (USER_HZ, 100 on Linux).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	var ut, st int64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return time.Duration(ut+st) * 10 * time.Millisecond
}
