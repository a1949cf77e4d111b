package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
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
)

// serveConn drives `gatebridge serve --stdio` as a runtime would.
type serveConn struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	mu     sync.Mutex
	nextID int
	waits  map[string]chan *rpc.Message
	notes  chan *rpc.Message
	stderr *strings.Builder
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
	s := &serveConn{t: t, cmd: cmd, in: in, waits: map[string]chan *rpc.Message{}, notes: make(chan *rpc.Message, 10000), stderr: &strings.Builder{}}
	cmd.Stderr = &lockedWriter{b: s.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var m rpc.Message
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				t.Errorf("not JSON: %q", sc.Bytes())
				continue
			}
			if m.Method == "" {
				s.mu.Lock()
				ch := s.waits[string(m.ID)]
				delete(s.waits, string(m.ID))
				s.mu.Unlock()
				if ch != nil {
					ch <- &m
				}
				continue
			}
			s.notes <- &m
		}
		close(s.notes)
	}()
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
	})
	s.call(rpc.MethodInitialize, rpc.InitializeParams{ClientName: "integration", ProtocolVersion: 1}, nil)
	s.write(rpc.Message{JSONRPC: "2.0", Method: rpc.MethodInitialized})
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

func (s *serveConn) write(m rpc.Message) {
	b, _ := json.Marshal(m)
	if _, err := s.in.Write(append(b, '\n')); err != nil {
		s.t.Fatalf("write to serve: %v", err)
	}
}

func (s *serveConn) call(method string, params, out any) {
	s.t.Helper()
	m := s.request(method, params)
	if m.Error != nil {
		s.t.Fatalf("%s: %d %s %v\nserve stderr: %s", method, m.Error.Code, m.Error.Message, m.Error.Data, s.stderr)
	}
	if out != nil {
		json.Unmarshal(m.Result, out)
	}
}

// request sends method and returns the response.
func (s *serveConn) request(method string, params any) *rpc.Message {
	s.t.Helper()
	s.mu.Lock()
	s.nextID++
	id := fmt.Sprint(s.nextID)
	ch := make(chan *rpc.Message, 1)
	s.waits[id] = ch
	s.mu.Unlock()
	p, _ := json.Marshal(params)
	s.write(rpc.Message{JSONRPC: "2.0", ID: json.RawMessage(id), Method: method, Params: p})
	select {
	case m := <-ch:
		return m
	case <-time.After(90 * time.Second):
		s.t.Fatalf("%s: no answer in 90s; stderr %s", method, s.stderr)
		return nil
	}
}

// run starts argv and returns its stdout, stderr and exit, answering
// gate/call requests with answer.
func (s *serveConn) run(sandboxID, id string, answer func(rpc.GateCallParams) rpc.GateCallResult, argv ...string) (string, string, rpc.ProcessExitedParams) {
	s.t.Helper()
	s.call(rpc.MethodProcessStart, rpc.ProcessStartParams{ProcessID: id, SandboxID: sandboxID, Argv: argv}, nil)
	var out, errb []byte
	for {
		select {
		case m, ok := <-s.notes:
			if !ok {
				s.t.Fatalf("serve ended; stderr %s", s.stderr)
			}
			switch m.Method {
			case rpc.MethodProcessOutput:
				var p rpc.ProcessOutputParams
				json.Unmarshal(m.Params, &p)
				if p.ProcessID != id {
					continue
				}
				if p.Stream == "stdout" {
					out = append(out, p.Chunk...)
				} else {
					errb = append(errb, p.Chunk...)
				}
			case rpc.MethodProcessExited:
				var p rpc.ProcessExitedParams
				json.Unmarshal(m.Params, &p)
				if p.ProcessID == id {
					return string(out), string(errb), p
				}
			case rpc.MethodGateCall:
				var p rpc.GateCallParams
				json.Unmarshal(m.Params, &p)
				r, _ := json.Marshal(answer(p))
				s.write(rpc.Message{JSONRPC: "2.0", ID: m.ID, Result: r})
			}
		case <-time.After(90 * time.Second):
			s.t.Fatalf("process %s: no exit in 90s; stderr %s", id, s.stderr)
		}
	}
}

// TestServe drives the binary on every backend: a writable sandbox whose
// files persist between processes, built-in and runtime gates, and no
// container, process or session left once the client closes stdin.
func TestServe(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		s := startServe(t, nil)
		ws := workspace(t)
		os.Chmod(ws, 0o777)
		s.call(rpc.MethodGateRegister, rpc.GateRegisterParams{Name: "ask_runtime"}, nil)
		var open rpc.SandboxOpenResult
		s.call(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "sb", Backend: backend, Workspace: ws, WritableWorkspace: true}, &open)
		answer := func(p rpc.GateCallParams) rpc.GateCallResult {
			return rpc.GateCallResult{Stdout: []byte("answer to " + strings.Join(p.Args, ",") + " from " + p.Cwd + "\n")}
		}
		out, errOut, ex := s.run("sb", "w", answer, "sh", "-c", "mkdir -p d && echo persisted > d/f && cd d && ask_runtime x y")
		if ex.ExitCode != 0 || out != "answer to x,y from "+filepath.Join(open.WorkspaceInside, "d")+"\n" {
			t.Fatalf("first: exit %d stdout %q stderr %q", ex.ExitCode, out, errOut)
		}
		out, errOut, ex = s.run("sb", "r", answer, "sh", "-c", "read_file d/f; cat d/f")
		if ex.ExitCode != 0 || out != "persisted\npersisted\n" {
			t.Fatalf("second: exit %d stdout %q stderr %q", ex.ExitCode, out, errOut)
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
	s.call(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "doomed", Backend: "docker", Workspace: ws}, nil)
	if ownedContainers(t, ws) != 1 {
		t.Fatal("no owned container")
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	if ownedContainers(t, ws) != 1 {
		t.Fatal("the container went away with its server: nothing to test")
	}
	s2 := startServe(t, nil)
	s2.call(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "next", Backend: "docker", Workspace: workspace(t)}, nil)
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
			s.call(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "sb", Backend: backend, Workspace: ws, WritableWorkspace: true}, nil)
			out, errOut, ex := s.run("sb", "p", nil, "sh", "-c", "id -u; echo x > f; read_file f")
			if ex.ExitCode != 0 || out != "65534\nx\n" {
				t.Fatalf("exit %d stdout %q stderr %q", ex.ExitCode, out, errOut)
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
		m := s.request(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "sb", Backend: "local", Workspace: ws, WritableWorkspace: tc.writable})
		if m.Error == nil || !strings.Contains(m.Error.Message, tc.want) {
			t.Errorf("config %s, writable %v: %+v, want a refusal saying %q", tc.config, tc.writable, m.Error, tc.want)
		}
	}
	// Read-only, the audit log's workspace is fine.
	s := startServe(t, nil, "--config", other)
	s.call(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "sb", Backend: "local", Workspace: ws}, nil)
}
