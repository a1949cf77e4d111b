// Command mcpserver is a small stdio MCP server built with the SDK, for the
// integration tests of MCP tools as gates.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type addIn struct {
	A int `json:"a" jsonschema:"the first addend"`
	B int `json:"b" jsonschema:"the second addend"`
}

type sumOut struct {
	Sum int `json:"sum"`
}

type probeIn struct {
	Read  string `json:"read,omitempty"`
	Write string `json:"write,omitempty"`
	Dial  string `json:"dial,omitempty"`
	Sleep string `json:"sleep,omitempty"`
}

type echoIn struct {
	ID   string   `json:"id"`
	Tags []string `json:"tags,omitempty"`
}

func main() {
	// GATEBRIDGE_TEST_MCP_STARTS: a file that gets a line per start.
	if f := os.Getenv("GATEBRIDGE_TEST_MCP_STARTS"); f != "" {
		if w, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
			fmt.Fprintln(w, "started")
			w.Close()
		}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "mcpserver"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Add two integers."},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, sumOut, error) {
			return nil, sumOut{in.A + in.B}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Say what arrived, as JSON text."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			b, _ := json.Marshal(in)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
		})
	// probe tries what an isolated server must not be able to do, and
	// says how each went (the isolation tests).
	mcp.AddTool(s, &mcp.Tool{Name: "probe", Description: "Try to read, write, dial; start a detached sleep."},
		func(_ context.Context, _ *mcp.CallToolRequest, in probeIn) (*mcp.CallToolResult, any, error) {
			var out []string
			res := func(what string, err error) {
				if err != nil {
					out = append(out, what+" failed")
				} else {
					out = append(out, what+" ok")
				}
			}
			if in.Read != "" {
				_, err := os.ReadFile(in.Read)
				res("read", err)
			}
			if in.Write != "" {
				res("write", os.WriteFile(in.Write, []byte("pwned\n"), 0o644))
			}
			if in.Dial != "" {
				c, err := net.DialTimeout("tcp", in.Dial, 2*time.Second)
				if err == nil {
					c.Write([]byte("hello\n"))
					c.Close()
				}
				res("dial", err)
			}
			if in.Sleep != "" {
				cmd := exec.Command("sleep", in.Sleep)
				cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
				err := cmd.Start()
				if err == nil {
					cmd.Process.Release()
				}
				res("sleep", err)
			}
			out = append(out, fmt.Sprintf("uid %d", os.Geteuid()))
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(out, "\n")}}}, nil, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
