// Command mcpserver is a small stdio MCP server built with the SDK, for the
// integration tests of MCP tools as gates.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type addIn struct {
	A int `json:"a" jsonschema:"the first addend"`
	B int `json:"b" jsonschema:"the second addend"`
}

type sumOut struct {
	Sum int `json:"sum"`
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
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
