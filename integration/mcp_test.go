package integration

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPServer drives `gatebridge mcp` with the MCP SDK's own client over
// stdio, on every backend: the bash tool runs in the sandbox with the
// gates, files persist between calls of the session, and nothing is left
// (no container, no file in the workspace but the command's) once the
// client is gone.
func TestMCPServer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		ws := workspace(t)
		os.Chmod(ws, 0o777)
		must(t, os.WriteFile(filepath.Join(ws, "in.txt"), []byte("from the host\n"), 0o644))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.Command(binary, "mcp", "--sandbox", backend, "--workspace", ws, "--writable-workspace")
		cmd.Dir = workspace(t)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "integration"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		call := func(command string) (string, map[string]any) {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": command}})
			if err != nil {
				t.Fatalf("%s: %v", command, err)
			}
			var out map[string]any
			b, _ := json.Marshal(res.StructuredContent)
			json.Unmarshal(b, &out)
			return res.Content[0].(*mcp.TextContent).Text, out
		}
		txt, out := call("read_file in.txt | tr a-z A-Z > out.txt; cat out.txt")
		if out["stdout"] != "FROM THE HOST\n" || out["exit_code"] != float64(0) {
			t.Fatalf("first call: %q %v", txt, out)
		}
		if _, out = call("cat out.txt"); out["stdout"] != "FROM THE HOST\n" {
			t.Fatalf("the file did not persist: %v", out)
		}
		if backend == "docker" && ownedContainers(t, ws) != 1 {
			t.Fatal("no owned container for the MCP session")
		}
		if err := cs.Close(); err != nil {
			t.Logf("close: %v", err)
		}
		if backend == "docker" {
			if n := ownedContainers(t, ws); n != 0 {
				t.Fatalf("%d containers left after the client went away", n)
			}
		}
		ents, _ := os.ReadDir(ws)
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if strings.Join(names, ",") != "in.txt,out.txt" {
			t.Fatalf("workspace holds %v", names)
		}
	})
}

// gatebridge mcp --http: a bearer token is required (401 without it), and
// the server will not start without one, on loopback too; a session works
// through the SDK's streamable HTTP client.
func TestMCPHTTP(t *testing.T) {
	needBackend(t, "local")
	srv := startMCPHTTP(t, "local", workspace(t), mcpTestToken)
	dir, tokenFile := srv.dir, srv.tokenFile
	resp, err := http.Post(srv.url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the token: %s", resp.Status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs := srv.connect(ctx)
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo over http; gb_echo gate"}})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "over http\ngate\n") {
		t.Fatalf("call: %v %+v", err, res)
	}
	cs.Close()

	// Without a token: refused at start, on loopback and off it.
	for _, addr := range []string{"127.0.0.1:0", "0.0.0.0:0"} {
		out := gbRaw(t, dir, nil, nil, 0, "mcp", "--sandbox", "local", "--http", addr)
		if out.Code != 125 || !strings.Contains(out.Stderr, "--http needs --token-file") {
			t.Fatalf("%s without a token: %+v", addr, out)
		}
	}
	// A token file others can read: refused.
	must(t, os.Chmod(tokenFile, 0o644))
	out := gbRaw(t, dir, nil, nil, 0, "mcp", "--sandbox", "local", "--workspace", workspace(t), "--http", "0.0.0.0:0", "--token-file", tokenFile)
	if out.Code == 0 || !strings.Contains(out.Stderr, "readable by others") {
		t.Fatalf("a 0644 token file: %+v", out)
	}
	// A workspace holding the token file: refused (the sandbox could read it).
	must(t, os.Chmod(tokenFile, 0o600))
	out = gbRaw(t, dir, nil, nil, 0, "mcp", "--sandbox", "local", "--workspace", dir, "--http", "0.0.0.0:0", "--token-file", tokenFile)
	if out.Code != 125 || !strings.Contains(out.Stderr, "which the sandbox could read") {
		t.Fatalf("a workspace holding the token file: %+v", out)
	}
}

type authTransport struct{ auth string }

func (a authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", a.auth)
	return http.DefaultTransport.RoundTrip(r)
}

// Over HTTP each MCP session has its own sandbox, removed when that
// session ends while the server goes on (docker: its container).
func TestMCPHTTPSessionSandboxes(t *testing.T) {
	needBackend(t, "docker")
	ws := workspace(t)
	srv := startMCPHTTP(t, "docker", ws, mcpTestToken)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	connect := func() *mcp.ClientSession { return srv.connect(ctx) }
	a, b := connect(), connect()
	for _, cs := range []*mcp.ClientSession{a, b} {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "true"}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := ownedContainers(t, ws); n != 2 {
		t.Fatalf("%d containers for 2 sessions", n)
	}
	a.Close()
	if !sandboxtest.Poll(30*time.Second, func() bool { return ownedContainers(t, ws) == 1 }) {
		t.Fatalf("%d containers after one session ended, want 1", ownedContainers(t, ws))
	}
	if _, err := b.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "true"}}); err != nil {
		t.Fatalf("the other session: %v", err)
	}
	b.Close()
	srv.cmd.Process.Signal(syscall.SIGTERM)
	srv.cmd.Wait()
	if n := ownedContainers(t, ws); n != 0 {
		t.Fatalf("%d containers after the server stopped", n)
	}
}

// The review's attack: 24 clients of `mcp --http` held 24 docker
// containers, for an hour each. With mcp.sessions.max_sandboxes 2 (set in
// the env), a third session's call is a tool error naming the key and no
// third sandbox exists; sessions idle for mcp.sessions.idle_timeout lose
// theirs, and the third then gets one.
func TestMCPHTTPSandboxCap(t *testing.T) {
	for _, backend := range []string{"local", "docker"} {
		t.Run(backend, func(t *testing.T) {
			needBackend(t, backend)
			ws := workspace(t)
			srv := startMCPHTTP(t, backend, ws, mcpTestToken, "GATEBRIDGE_MCP_SESSIONS_MAX_SANDBOXES=2", "GATEBRIDGE_MCP_SESSIONS_IDLE_TIMEOUT=3s")
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			call := func(cs *mcp.ClientSession) *mcp.CallToolResult {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo ok"}})
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			a, b, c := srv.connect(ctx), srv.connect(ctx), srv.connect(ctx)
			defer a.Close()
			defer b.Close()
			defer c.Close()
			for _, cs := range []*mcp.ClientSession{a, b} {
				if res := call(cs); res.IsError {
					t.Fatalf("within the cap: %+v", res.Content[0])
				}
			}
			res := call(c)
			if txt := res.Content[0].(*mcp.TextContent).Text; !res.IsError || !strings.Contains(txt, "mcp.sessions.max_sandboxes") {
				t.Fatalf("a third session: %q", txt)
			}
			if backend == "docker" {
				if n := ownedContainers(t, ws); n != 2 {
					t.Fatalf("%d containers for a cap of 2", n)
				}
			}
			if !sandboxtest.Poll(time.Minute, func() bool { return !call(c).IsError }) {
				t.Fatalf("the third session got no sandbox after the others were idle; server: %s", srv.stderr.String())
			}
			if backend == "docker" {
				if !sandboxtest.Poll(30*time.Second, func() bool { return ownedContainers(t, ws) == 1 }) {
					t.Fatalf("%d containers once two sessions were idle and one works", ownedContainers(t, ws))
				}
			}
		})
	}
}

// mcpHTTPServer is `gatebridge mcp --http` on a free loopback port.
type mcpHTTPServer struct {
	t                          *testing.T
	url, token, dir, tokenFile string
	cmd                        *exec.Cmd
	stderr                     *lockedWriter
}

// mcpTestToken is the token of the tests' mcp --http servers: at least
// rpc.MinTokenBytes long.
const mcpTestToken = "s3cret-token-7d1e4b2a9c0f5e38d6a1"

// startMCPHTTP starts it on backend with workspace ws, the bearer token
// and env (KEY=VALUE) added, and waits until it serves; it is stopped at
// cleanup.
func startMCPHTTP(t *testing.T, backend, ws, token string, env ...string) *mcpHTTPServer {
	t.Helper()
	s := &mcpHTTPServer{t: t, token: token, dir: workspace(t), stderr: &lockedWriter{b: &strings.Builder{}}}
	s.tokenFile = filepath.Join(s.dir, "token")
	must(t, os.WriteFile(s.tokenFile, []byte(token+"\n"), 0o600))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := ln.Addr().String()
	ln.Close()
	s.url = "http://" + addr + "/"
	s.cmd = exec.Command(binary, "mcp", "--sandbox", backend, "--workspace", ws, "--http", addr, "--token-file", s.tokenFile)
	s.cmd.Dir = s.dir
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.Stderr = s.stderr
	must(t, s.cmd.Start())
	t.Cleanup(func() { s.cmd.Process.Signal(syscall.SIGTERM); s.cmd.Wait() })
	if !sandboxtest.Poll(10*time.Second, func() bool { return strings.Contains(s.stderr.String(), "serving streamable HTTP") }) {
		t.Fatalf("no server: %s", s.stderr.String())
	}
	return s
}

// connect opens an MCP session with the SDK's streamable HTTP client,
// sending the token.
func (s *mcpHTTPServer) connect(ctx context.Context) *mcp.ClientSession {
	s.t.Helper()
	hc := &http.Client{Transport: authTransport{"Bearer " + s.token}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "integration"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.url, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		s.t.Fatalf("connect: %v; server: %s", err, s.stderr.String())
	}
	return cs
}
