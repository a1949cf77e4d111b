package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
