package integration

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/bridge/rpc/rpctest"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

// serveConn drives `gatebridge serve --stdio` as a runtime would.
type serveConn struct {
	*rpctest.Client
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	stderr *lockedWriter
}

func startServe(t *testing.T, cred *syscall.Credential, args ...string) *serveConn {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--stdio"}, args...)...)
	cmd.Dir = workspace(t) // its own: a config elsewhere is not in it
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=/nonexistent"}
	}
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	s := &serveConn{t: t, cmd: cmd, in: in, stderr: &lockedWriter{b: &strings.Builder{}}}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.Client = rpctest.New(t, out, in)
	t.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Errorf("serve did not exit within 30s of stdin closing")
		}
		if t.Failed() {
			t.Logf("serve stderr:\n%s", s.stderr)
		}
	})
	s.Initialize()
	return s
}

type lockedWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestServe drives the binary on every backend: a writable sandbox whose
// files persist between processes, built-in and runtime gates, and no
// container, process or session left once the client closes stdin.
func TestServe(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		s := startServe(t, nil)
		ws := workspace(t)
		os.Chmod(ws, 0o777)
		s.Call(rpc.MethodGateRegister, rpc.GateRegisterParams{Name: "ask_runtime"}, nil)
		var open rpc.SandboxOpenResult
		s.Call(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "sb", Backend: backend, Workspace: ws, WritableWorkspace: true}, &open)
		answer := func(p rpc.GateCallParams) rpc.GateCallResult {
			return rpc.GateCallResult{Stdout: []byte("answer to " + strings.Join(p.Args, ",") + " from " + p.Cwd + "\n")}
		}
		o := s.Run("sb", "w", answer, "sh", "-c", "mkdir -p d && echo persisted > d/f && cd d && ask_runtime x y")
		if o.Exited.ExitCode != 0 || string(o.Stdout) != "answer to x,y from "+filepath.Join(open.WorkspaceInside, "d")+"\n" {
			t.Fatalf("first: exit %d stdout %q stderr %q", o.Exited.ExitCode, o.Stdout, o.Stderr)
		}
		o = s.Run("sb", "r", answer, "sh", "-c", "read_file d/f; cat d/f")
		if o.Exited.ExitCode != 0 || string(o.Stdout) != "persisted\npersisted\n" {
			t.Fatalf("second: exit %d stdout %q stderr %q", o.Exited.ExitCode, o.Stdout, o.Stderr)
		}
		if backend == "docker" {
			if n := ownedContainers(t, ws); n == 0 {
				t.Fatal("no owned container while the docker sandbox is open")
			}
		}
		s.in.Close()
		if err := s.cmd.Wait(); err != nil {
			t.Fatalf("serve exit: %v; stderr %s", err, s.stderr)
		}
		if backend == "docker" {
			if n := ownedContainers(t, ws); n != 0 {
				t.Fatalf("%d owned containers left after the client left", n)
			}
		}
		// Nothing of the sandbox's is left in the workspace but what the
		// command wrote: not the empty mount point that kept .git
		// read-only.
		ents, _ := os.ReadDir(ws)
		if len(ents) != 1 || ents[0].Name() != "d" {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Fatalf("workspace holds %v after the sandbox closed, want only d", names)
		}
	})
}

// ownedContainers counts the protocol-owned docker containers with workspace
// ws.
func ownedContainers(t *testing.T, ws string) int {
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=io.gatebridge.owned=true", "--filter", "label=io.gatebridge.workspace="+ws).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return len(strings.Fields(string(out)))
}

// A server killed with SIGKILL cannot clean up: its container is removed by
// the next gatebridge that uses docker, its sessions by the next that
// opens one.
func TestServeCrashCleanup(t *testing.T) {
	needBackend(t, "docker")
	s := startServe(t, nil)
	ws := workspace(t)
	s.Call(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "doomed", Backend: "docker", Workspace: ws}, nil)
	if ownedContainers(t, ws) != 1 {
		t.Fatal("no owned container")
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	if ownedContainers(t, ws) != 1 {
		t.Fatal("the container went away with its server: nothing to test")
	}
	s2 := startServe(t, nil)
	s2.Call(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "next", Backend: "docker", Workspace: workspace(t)}, nil)
	if n := ownedContainers(t, ws); n != 0 {
		t.Fatalf("the dead server's container is still there after the next server opened a docker sandbox")
	}
}

// serve as an unprivileged user (gatebridge is not root), local and bwrap.
func TestServeNonRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to nobody")
	}
	for _, backend := range []string{"local", "bwrap"} {
		t.Run(backend, func(t *testing.T) {
			needBackend(t, backend)
			base := workspace(t)
			ws := filepath.Join(base, "ws")
			os.Mkdir(ws, 0o700)
			os.Chown(ws, nobody, nobody)
			s := startServe(t, &syscall.Credential{Uid: nobody, Gid: nobody})
			s.Call(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "sb", Backend: backend, Workspace: ws, WritableWorkspace: true}, nil)
			o := s.Run("sb", "p", nil, "sh", "-c", "id -u; echo x > f; read_file f")
			if o.Exited.ExitCode != 0 || string(o.Stdout) != "65534\nx\n" {
				t.Fatalf("exit %d stdout %q stderr %q", o.Exited.ExitCode, o.Stdout, o.Stderr)
			}
		})
	}
}

// A sandbox whose workspace holds serve's config file is refused: the
// command could rewrite what the next gatebridge reads (command gates,
// limits). So is a writable workspace holding the audit log.
func TestServeRefusesWorkspaceWithConfig(t *testing.T) {
	ws := workspace(t)
	cfg := filepath.Join(ws, "gatebridge.yaml")
	audit := filepath.Join(ws, "logs", "audit.jsonl")
	os.Mkdir(filepath.Dir(audit), 0o755)
	other := filepath.Join(workspace(t), "gatebridge.yaml")
	for _, c := range []struct{ file, body string }{{cfg, ""}, {other, "audit:\n  path: " + audit + "\n"}} {
		if err := os.WriteFile(c.file, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		config   string
		writable bool
		want     string
	}{
		{cfg, false, "holds gatebridge's config file"},
		{other, true, "holds the audit log"},
	} {
		s := startServe(t, nil, "--config", tc.config)
		m := s.Request(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "sb", Backend: "local", Workspace: ws, WritableWorkspace: tc.writable})
		if m.Error == nil || !strings.Contains(m.Error.Message, tc.want) {
			t.Errorf("config %s, writable %v: %+v, want a refusal saying %q", tc.config, tc.writable, m.Error, tc.want)
		}
	}
	// Read-only, the audit log's workspace is fine.
	s := startServe(t, nil, "--config", other)
	s.Call(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "sb", Backend: "local", Workspace: ws}, nil)
}

// gate/list is the JSON of `gatebridge gates --format json`, with the
// connection's own gates added (kind runtime).
func TestServeGateListMatchesGates(t *testing.T) {
	ws := workspace(t)
	cli := gbRaw(t, ws, nil, nil, time.Minute, "gates", "--format", "json", "--workspace", ws)
	if cli.Code != 0 {
		t.Fatalf("gates: %+v", cli)
	}
	var want []rpc.GateDoc
	if err := json.Unmarshal([]byte(cli.Stdout), &want); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, nil)
	var got []rpc.GateDoc
	s.Call(rpc.MethodGateList, struct{}{}, &got)
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(want)
	if string(a) != string(b) {
		t.Fatalf("gate/list:\n%s\ngates --format json:\n%s", a, b)
	}
	s.Call(rpc.MethodGateRegister, rpc.GateRegisterParams{Name: "mine", Summary: "s"}, nil)
	got = nil
	s.Call(rpc.MethodGateList, struct{}{}, &got)
	if len(got) != len(want)+1 {
		t.Fatalf("after gate/register: %d gates, want %d", len(got), len(want)+1)
	}
	for _, g := range got {
		if g.Name == "mine" && g.Kind != rpc.KindRuntime {
			t.Fatalf("mine: kind %q", g.Kind)
		}
	}
}

// SIGTERM (and SIGINT, SIGHUP) end `serve --stdio` while the client keeps
// stdin open: everything the connection started is stopped and the
// server exits 0. (A Read of stdin cannot be interrupted: the server
// stopped only when the client closed stdin.)
func TestServeStdioSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			s := startServe(t, nil)
			s.Call(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "sb", Backend: "local", Workspace: workspace(t)}, nil)
			mark := "4545" + fmtNano()
			s.Call(rpc.MethodProcessStart, rpc.ProcessStartParams{ProcessID: "p", SandboxID: "sb", Argv: []string{"sleep", mark}}, nil)
			if !sandboxtest.Poll(20*time.Second, func() bool { return len(sleepPids(mark)) == 1 }) {
				t.Fatal("the process does not run")
			}
			s.cmd.Process.Signal(sig)
			done := make(chan error, 1)
			go func() { done <- s.cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("exit: %v; stderr %s", err, s.stderr)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("serve --stdio still runs 30s after %v, its stdin open", sig)
			}
			if left := sleepPids(mark); len(left) > 0 {
				t.Fatalf("the connection's process outlived the server: %v", left)
			}
		})
	}
}
