package integration

// OCI runtimes: sandbox.docker.runtime (--runtime), and what behaves
// differently under gVisor (runsc): its own kernel and /proc, no FIFO
// across the bind mount (wrappers poll), ACLs ignored (sessions handed
// over by ownership), the pids limit counting the sentry's host tasks, and
// a fork bomb ending the whole sandbox rather than failing one fork.

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/bridge/rpc"
)

// TestRuntimeUnknown: an OCI runtime the engine has not registered is an
// error naming the key and the engine's runtimes, with backend docker and
// with auto (which must not fall back to a weaker sandbox).
func TestRuntimeUnknown(t *testing.T) {
	needBackend(t, "docker")
	for _, sb := range []string{"docker", "auto"} {
		out := gb(t, sb, Run{Args: []string{"--runtime", "nosuch"}, Command: []string{"true"}})
		if out.Code != 125 {
			t.Errorf("--sandbox %s --runtime nosuch: exit %d, want 125; stderr %q", sb, out.Code, out.Stderr)
		}
		for _, w := range []string{`unknown OCI runtime "nosuch"`, "runc", "sandbox.docker.runtime"} {
			if !strings.Contains(out.Stderr, w) {
				t.Errorf("--sandbox %s: stderr lacks %q: %q", sb, w, out.Stderr)
			}
		}
	}
}

// TestRuntimeGVisor: the command runs on gVisor's kernel, gates answer
// with wrappers polling (no FIFO crosses), /proc shows the sandbox's own
// processes only, and the limits hold.
func TestRuntimeGVisor(t *testing.T) {
	needBackend(t, dockerRunsc)
	res, out := gbJSON(t, dockerRunsc, Run{Command: []string{"sh", "-c", `
echo "kernel|$(uname -r)"
echo "dmesg|$(dmesg 2>/dev/null | head -n 1)"
echo "wake|$GATEBRIDGE_WAKE"
echo "gate|$(gb_echo through gvisor)"
echo "procs|$(ls /proc | grep -c '^[0-9]')"
echo "pid1|$(tr '\0' ' ' < /proc/1/cmdline)"
echo "id|$(id -u)"
submit done`}})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d; stderr %s / %s", res.ExitCode, res.Stderr, out.Stderr)
	}
	got := advResults(res.Stdout)
	if got["kernel"].exit != "4.4.0" || !strings.Contains(got["dmesg"].exit, "gVisor") {
		t.Errorf("not gVisor's kernel: uname %q, dmesg %q", got["kernel"].exit, got["dmesg"].exit)
	}
	if got["wake"].exit != "poll" {
		t.Errorf("wake mode %q inside, want poll (a FIFO does not cross into gVisor)", got["wake"].exit)
	}
	if got["gate"].exit != "through gvisor" || res.Answer == nil || *res.Answer != "done" {
		t.Errorf("gates: gb_echo %q, answer %v", got["gate"].exit, res.Answer)
	}
	if n, _ := strconv.Atoi(got["procs"].exit); n == 0 || n > 20 {
		t.Errorf("%d processes in /proc: host processes visible?", n)
	}
	if got["id"].exit == "0" {
		t.Errorf("the command runs as root")
	}
}

// TestRuntimeGVisorLimits: memory and /tmp limits hold under gVisor as
// under runc; past the pids limit a fork bomb ends the whole sandbox
// (gVisor's sentry cannot make its host task) instead of failing one fork,
// and the run still returns at once with its container gone.
func TestRuntimeGVisorLimits(t *testing.T) {
	needBackend(t, dockerRunsc)
	cfg := "sandbox:\n  limits:\n    memory: 67108864\n    tmp_size: 8388608\n    pids: 32\n"
	out := gb(t, dockerRunsc, Run{Config: cfg, Command: []string{"sh", "-c",
		`dd if=/dev/zero of=/tmp/x bs=1M count=20 2>/dev/null; echo "tmp|$(wc -c < /tmp/x)"`}})
	if got := advResults(out.Stdout)["tmp"].exit; got != "8388608" {
		t.Errorf("/tmp took %q bytes, want the 8 MiB tmp_size; stderr %q", got, out.Stderr)
	}
	out = gb(t, dockerRunsc, Run{Config: cfg, Command: []string{"sh", "-c",
		`x=$(head -c 200000000 /dev/zero | tr '\0' a); echo "len|${#x}"`}})
	if out.Code != 137 {
		t.Errorf("200 MB in a 64 MiB sandbox: exit %d, want 137 (killed); stdout %q", out.Code, out.Stdout)
	}
	start := time.Now()
	res, out := gbJSON(t, dockerRunsc, Run{Config: cfg, Timeout: time.Minute, Command: []string{"sh", "-c",
		`n=0; while [ $n -lt 2000 ]; do (sleep 60 &) || break; n=$((n+1)); done; echo "forked|$n"`}})
	if res.ExitCode == 0 {
		t.Errorf("a fork bomb past pids 32 ended with exit 0: %q", res.Stdout)
	}
	if n, _ := strconv.Atoi(advResults(res.Stdout)["forked"].exit); n >= 2000 {
		t.Errorf("the fork bomb started all its %d processes", n)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the fork bomb's run took %v", d)
	}
	t.Logf("fork bomb: exit %d in %v, stdout %q, stderr %q", res.ExitCode, time.Since(start).Round(time.Millisecond),
		strings.TrimSpace(res.Stdout), strings.TrimSpace(out.Stderr))
	if id := res.SandboxInfo["container_id"]; id == "" {
		t.Errorf("no container id in %v", res.SandboxInfo)
	} else if o, err := exec.Command("docker", "inspect", "--format", "{{.State.Status}}", id).CombinedOutput(); err == nil {
		t.Errorf("container %s still there after the run: %s", id, o)
	}
}

// TestRuntimeGVisorSignals: the timeout's TERM, then KILL after the grace,
// reach the command under gVisor (exit 124), and a command killed by a
// signal exits 128+N.
func TestRuntimeGVisorSignals(t *testing.T) {
	needBackend(t, dockerRunsc)
	start := time.Now()
	out := gb(t, dockerRunsc, Run{Args: []string{"--timeout", "2s"}, Command: []string{"sh", "-c", `trap '' TERM; sleep 60`}})
	if out.Code != 124 {
		t.Errorf("timeout: exit %d, want 124; stderr %q", out.Code, out.Stderr)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("timeout of 2s took %v", d)
	}
	out = gb(t, dockerRunsc, Run{Command: []string{"sh", "-c", `kill -TERM $$; sleep 5`}})
	if out.Code != 143 {
		t.Errorf("killed by TERM: exit %d, want 143", out.Code)
	}
}

// TestServeRuntime: sandbox/open's "runtime" runs a protocol sandbox
// under gVisor, gates answering (through the runtime's own gate too), and
// an unknown one is an error naming the engine's runtimes.
func TestServeRuntime(t *testing.T) {
	needBackend(t, dockerRunsc)
	s := startServe(t, nil)
	s.Call(rpc.MethodGateRegister, rpc.GateRegisterParams{Name: "ask_runtime"}, nil)
	if e := s.CallErr(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "bad", Backend: "docker", Runtime: "nosuch", Workspace: workspace(t)}); e == nil ||
		!strings.Contains(e.Message, `unknown OCI runtime "nosuch"`) || !strings.Contains(e.Message, "runsc") {
		t.Errorf("runtime nosuch: %+v", e)
	}
	if e := s.CallErr(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "bw", Backend: "bwrap", Runtime: "runsc", Workspace: workspace(t)}); e == nil || !strings.Contains(e.Message, `"runtime"`) {
		t.Errorf("runtime with bwrap: %+v", e)
	}
	s.Call(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "sb", Backend: "docker", Runtime: "runsc", Workspace: workspace(t)}, nil)
	answer := func(p rpc.GateCallParams) rpc.GateCallResult {
		return rpc.GateCallResult{Stdout: []byte("answer " + strings.Join(p.Args, ",") + "\n")}
	}
	o := s.Run("sb", "p", answer, "sh", "-c", "uname -r; ask_runtime x; gb_echo y")
	if o.Exited.ExitCode != 0 || string(o.Stdout) != "4.4.0\nanswer x\ny\n" {
		t.Fatalf("exit %d stdout %q stderr %q", o.Exited.ExitCode, o.Stdout, o.Stderr)
	}
}
