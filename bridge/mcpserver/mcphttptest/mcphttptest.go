// Package mcphttptest runs an MCP streamable-HTTP server in a test,
// connects to it with a chosen Authorization header and calls its tools:
// the scaffolding the MCP server's own tests and the CLI's `mcp` tests
// share.
package mcphttptest

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// LockedBuffer is a strings.Builder safe for concurrent use.
type LockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Server is a server started by [Start].
type Server struct {
	URL    string        // where it serves ("" when it returned first)
	Err    error         // what serve returned, when it did before serving
	Stderr *LockedBuffer // what it logged
}

var servingLine = regexp.MustCompile(`serving streamable HTTP on (http://\S+/)`)

// Start runs serve, which logs to stderr, and waits until it logs the
// line saying where it serves, or returns. It is stopped at cleanup.
func Start(t *testing.T, serve func(ctx context.Context, stderr *LockedBuffer) error) *Server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{Stderr: &LockedBuffer{}}
	errc := make(chan error, 1)
	go func() { errc <- serve(ctx, s.Stderr) }()
	t.Cleanup(func() {
		cancel()
		if s.URL == "" {
			return
		}
		select {
		case <-errc:
		case <-time.After(30 * time.Second):
			t.Error("the server did not stop")
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case s.Err = <-errc:
			return s
		default:
		}
		if m := servingLine.FindStringSubmatch(s.Stderr.String()); m != nil {
			s.URL = m[1]
			return s
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("neither served nor failed: %s", s.Stderr.String())
	return nil
}

// Connect opens an MCP session over streamable HTTP sending auth as the
// Authorization header ("": none).
func Connect(ctx context.Context, url, auth string) (*mcp.ClientSession, error) {
	hc := &http.Client{Transport: authHeader(auth)}
	return mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
}

type authHeader string

func (a authHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	if a != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", string(a))
	}
	return http.DefaultTransport.RoundTrip(r)
}

// Call calls the tool name with args, failing t on a protocol error, and
// decodes the result's structured content into out (when both are
// there).
func Call(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	if res.StructuredContent != nil && out != nil {
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, out)
	}
	return res
}

// Text is the text content of res, concatenated.
func Text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
