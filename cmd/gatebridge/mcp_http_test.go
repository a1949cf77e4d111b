package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/bridge/mcpserver"
	"github.com/gatebridge/gatebridge/bridge/mcpserver/mcphttptest"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/internal/hint"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/local"
)

// lockedBuffer is a strings.Builder safe for concurrent use.
type lockedBuffer = mcphttptest.LockedBuffer

// testMCPServer is an MCP server on the local backend with the built-in
// gates, in a fresh workspace.
func testMCPServer(t *testing.T) *mcpserver.Server {
	t.Helper()
	reg := sandbox.NewRegistry()
	if err := local.Register(reg); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	os.Chmod(ws, 0o777)
	os.Chmod(filepath.Dir(ws), 0o755)
	return mcpserver.New(mcpserver.Options{Backend: local.Name, Workspace: ws, Control: control.Options{Backends: reg,
		Gates: func(workspace, inside string, writable bool) (*gates.Registry, map[string]string, error) {
			reg := gates.NewRegistry()
			return reg, map[string]string{}, gates.RegisterBuiltins(reg, gates.Options{Root: workspace, SandboxRoot: inside})
		}}})
}

// bash calls the bash tool and decodes its structured result.
func bash(t *testing.T, cs *mcp.ClientSession, args map[string]any) (*mcp.CallToolResult, struct{ Stdout string }) {
	t.Helper()
	var out struct{ Stdout string }
	return mcphttptest.Call(t, cs, "bash", args, &out), out
}

var text = mcphttptest.Text

// testToken is the tests' token for mcp --http: at least
// rpc.MinTokenBytes long.
const testToken = "s3cret-token-7d1e4b2a9c0f5e38d6a1"

// startHTTPMCP runs serveMCPHTTP on 127.0.0.1:0 with tokenFile; it waits
// until it serves or returns. It is stopped at cleanup.
func startHTTPMCP(t *testing.T, tokenFile string) *mcphttptest.Server {
	t.Helper()
	srv := testMCPServer(t)
	return mcphttptest.Start(t, func(ctx context.Context, stderr *lockedBuffer) error {
		return serveMCPHTTP(ctx, srv, mcpserver.HTTPOptions{Addr: "127.0.0.1:0"}, tokenFile, stderr)
	})
}

var connectHTTP = mcphttptest.Connect

// The review's attack: `mcp --http 127.0.0.1:PORT` without --token-file
// served anyone on this machine, and uid 4242 ran commands through it as
// the invoker (root: uid=0 with --sandbox local). Now it refuses to
// start; with a token, a client without it, or with a wrong one, is
// refused on loopback too.
func TestMCPHTTPNeedsToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	s := startHTTPMCP(t, "")
	if s.URL != "" {
		// It serves: be the other local user.
		cs, err := connectHTTP(ctx, s.URL, "")
		if err != nil {
			t.Fatalf("served on loopback without a token (a client could not connect: %v)", err)
		}
		defer cs.Close()
		res, _ := bash(t, cs, map[string]any{"command": "id -u"})
		t.Fatalf("served on loopback without a token: a client without one ran `id -u`: %q", text(res))
	}
	err := s.Err
	if err == nil || !strings.Contains(err.Error(), "mcp: --http needs --token-file: anyone who reaches 127.0.0.1:0 could run commands as you") ||
		!strings.Contains(hint.Of(err), "openssl rand -hex 32 > token; chmod 600 token") {
		t.Fatalf("without --token-file: %v (hint %q)", err, hint.Of(err))
	}

	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s = startHTTPMCP(t, tokenFile)
	if s.URL == "" {
		t.Fatalf("with a token file: %v %s", s.Err, s.Stderr.String())
	}
	for _, auth := range []string{"", "Bearer wrong-token", "Bearer " + testToken + "-and-more", "Bearer " + testToken[:len(testToken)-1], testToken, "Basic " + testToken} {
		req, _ := http.NewRequest("POST", s.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("Authorization %q on loopback: %s", auth, resp.Status)
		}
		if cs, err := connectHTTP(ctx, s.URL, auth); err == nil {
			res, _ := bash(t, cs, map[string]any{"command": "id -u"})
			cs.Close()
			t.Fatalf("Authorization %q: a session, and `id -u` ran: %q", auth, text(res))
		}
	}
	cs, err := connectHTTP(ctx, s.URL, "Bearer "+testToken)
	if err != nil {
		t.Fatalf("with the token: %v", err)
	}
	defer cs.Close()
	if res, out := bash(t, cs, map[string]any{"command": "echo over http"}); res.IsError || out.Stdout != "over http\n" {
		t.Fatalf("with the token: %q", text(res))
	}
}

// The review's attack: wrong tokens are not rate limited, and one local
// process tried 8,000 a second, so a short token falls to guessing. Here
// the token file holds two hex digits and a local client tries all 256:
// mcp --http must refuse such a token at start, with a hint.
func TestMCPHTTPRefusesWeakToken(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("c3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startHTTPMCP(t, tokenFile)
	if s.URL != "" {
		for i := range 256 {
			req, _ := http.NewRequest("POST", s.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Authorization", fmt.Sprintf("Bearer %02x", i))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("mcp --http served a 2-byte token: a local client guessed it in %d tries (%s)", i+1, resp.Status)
			}
		}
		t.Fatal("mcp --http served a 2-byte token")
	}
	if err := s.Err; err == nil || !strings.Contains(err.Error(), "mcp: --token-file: "+tokenFile+": the token is 2 bytes long, shorter than 32") ||
		hint.Of(err) != "write a random one: openssl rand -hex 32 > "+tokenFile+"; chmod 600 "+tokenFile {
		t.Fatalf("a 2-byte token: %v (hint %q)", err, hint.Of(err))
	}
}
