package mcptools

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/gates/mcptools/mcptest"
	"github.com/gatebridge/gatebridge/gates/secrets"
)

const mcpSecret = "mcp-token-0123456789"

func secretStore(t *testing.T) *secrets.Store {
	t.Helper()
	t.Setenv("GB_TEST_MCP_SECRET", mcpSecret)
	st, err := secrets.New(map[string]secrets.Source{"tok": {Env: "GB_TEST_MCP_SECRET"}}, secrets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.ScrubEnv()
	return st
}

// A stdio server gets a secret through its own env entry; the variable
// the secret comes from is not in its environment (gatebridge's own,
// which it inherits, was scrubbed).
func TestStdioServerEnvSecret(t *testing.T) {
	st := secretStore(t)
	exe, _ := os.Executable()
	srv := Server{Name: "t", Command: []string{exe}, Tools: []string{"env"},
		Env:     []string{"GATEBRIDGE_TEST_MCP_SERVER=1", "GATEBRIDGE_TEST_MCP_ENVTOOL=1", "MCP_TOKEN=${secret:tok}"},
		Isolate: gates.IsolateSpec{Host: true}} // on the host: it inherits gatebridge's (scrubbed) environment
	reg := gates.NewRegistry()
	defer reg.Close()
	if _, err := mcpKind(t).Add(context.Background(), reg, srv, gates.Env{Secrets: st}); err != nil {
		t.Fatal(err)
	}
	if _, out, _ := call(t, reg, "t_env", "", "name=MCP_TOKEN"); strings.TrimSpace(out) != mcpSecret {
		t.Errorf("MCP_TOKEN = %q, want the secret", out)
	}
	if _, out, _ := call(t, reg, "t_env", "", "name=GB_TEST_MCP_SECRET"); strings.TrimSpace(out) != "unset" {
		t.Errorf("the secret's own variable reached the server: %q", out)
	}
}

// A streamable HTTP server gets the secret in a header of each request.
func TestHTTPServerHeaderSecret(t *testing.T) {
	st := secretStore(t)
	var bad int
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcptest.Hostile() }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+mcpSecret {
			bad++
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer ts.Close()
	reg := gates.NewRegistry()
	defer reg.Close()
	srv := Server{Name: "h", URL: ts.URL, Tools: []string{"lookup"}, Headers: map[string]string{"authorization": "Bearer ${secret:tok}"}}
	if _, err := mcpKind(t).Add(context.Background(), reg, srv, gates.Env{Secrets: st}); err != nil || bad != 0 {
		t.Fatalf("add: %v (%d unauthorized requests)", err, bad)
	}
}

// A reference where none is taken, or to a secret that does not exist,
// is an error naming the setting, before anything starts.
func TestSecretSettingErrors(t *testing.T) {
	st := secretStore(t)
	for _, tc := range []struct {
		srv   Server
		field string
	}{
		{Server{Name: "a", Command: []string{"/bin/echo", "${secret:tok}"}}, "command"},
		{Server{Name: "b", URL: "https://x/?t=${secret:tok}"}, "url"},
		{Server{Name: "c", URL: "https://x/", Headers: map[string]string{"x": "${secret:nope}"}}, "headers"},
		{Server{Name: "d", Command: []string{"/bin/echo"}, Env: []string{"X=${secret:Bad}"}}, "env"},
	} {
		_, err := mcpKind(t).New(context.Background(), tc.srv, gates.Env{Secrets: st})
		var se *gates.SettingError
		if !errors.As(err, &se) || se.Field != tc.field || se.Help("k") == "" {
			t.Errorf("%s: %v", tc.srv.Name, err)
		}
	}
}

// A server that logs its token on stderr and dies: the error quotes the
// end of its stderr (its last 2048 bytes), redacted. The sandbox chooses
// where that end starts (with the length of what the server logs after
// the token), and put it inside the token: the end of the token it got
// was not a value any redaction recognized.
func TestStderrTailLeavesNoPartialSecret(t *testing.T) {
	st := secretStore(t)
	exe, _ := os.Executable()
	srv := Server{Name: "t", Command: []string{exe}, Tools: []string{"crash"},
		Env:     []string{"GATEBRIDGE_TEST_MCP_SERVER=1", "GATEBRIDGE_TEST_MCP_ENVTOOL=1", "MCP_TOKEN=${secret:tok}"},
		Isolate: gates.IsolateSpec{Host: true}}
	reg := gates.NewRegistry()
	defer reg.Close()
	if _, err := mcpKind(t).Add(context.Background(), reg, srv, gates.Env{Secrets: st}); err != nil {
		t.Fatal(err)
	}
	// stderr: "debug: MCP_TOKEN=" TOKEN "\n" PAD; its last 2048 bytes
	// start 8 bytes into the token.
	pad := 2048 - (len(mcpSecret) - 8) - 1
	_, out, errOut := call(t, reg, "t_crash", "", "name=MCP_TOKEN", fmt.Sprintf("pad=%d", pad))
	seen := st.Redactor().String(out + errOut) // as the bridge passes it on
	if !strings.Contains(errOut, "went away") || strings.Contains(seen, mcpSecret[8:]) {
		t.Errorf("stdout %q stderr %q", out, errOut)
	}
}

// A stdio server does not inherit gatebridge's whole environment: a
// cloud credential exported for some other tool (no secret declares it)
// stays out, the base variables (PATH) and the ones env_passthrough names
// go in.
func TestStdioServerEnvScrubbed(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws-undeclared-credential-42")
	t.Setenv("GB_TEST_PASSED_ON", "passed-on-value")
	exe, _ := os.Executable()
	srv := Server{Name: "t", Command: []string{exe}, Tools: []string{"env"},
		Env:            []string{"GATEBRIDGE_TEST_MCP_SERVER=1", "GATEBRIDGE_TEST_MCP_ENVTOOL=1"},
		EnvPassthrough: []string{"GB_TEST_PASSED_ON"},
		Isolate:        gates.IsolateSpec{Host: true}}
	reg := gates.NewRegistry()
	defer reg.Close()
	if _, err := mcpKind(t).Add(context.Background(), reg, srv, gates.Env{}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"AWS_SECRET_ACCESS_KEY": "unset",
		"GB_TEST_PASSED_ON":     "passed-on-value",
		"PATH":                  os.Getenv("PATH"),
	} {
		if _, out, _ := call(t, reg, "t_env", "", "name="+name); strings.TrimSpace(out) != want {
			t.Errorf("%s in the server's environment = %q, want %q", name, strings.TrimSpace(out), want)
		}
	}
}

// env_passthrough takes variable names, and only for a stdio server.
func TestEnvPassthroughSettings(t *testing.T) {
	for _, srv := range []Server{
		{Name: "a", Command: []string{"/bin/echo"}, EnvPassthrough: []string{"AWS_*"}},
		{Name: "b", Command: []string{"/bin/echo"}, EnvPassthrough: []string{"X=1"}},
		{Name: "c", URL: "http://127.0.0.1:1/", EnvPassthrough: []string{"X"}},
	} {
		_, err := mcpKind(t).Add(context.Background(), gates.NewRegistry(), srv, gates.Env{})
		var se *gates.SettingError
		if !errors.As(err, &se) || se.Field != "env_passthrough" {
			t.Errorf("%s: %v, want an env_passthrough error", srv.Name, err)
		}
	}
}

// A stdio server on the host does not start in gatebridge's working
// directory when that is the workspace: there it would run among the
// sandbox's files (npx prefers the working directory's
// node_modules/.bin). Outside the workspace it keeps it.
func TestHostServerNotInWorkspace(t *testing.T) {
	ws := t.TempDir()
	t.Chdir(ws)
	exe, _ := os.Executable()
	srv := Server{Name: "t", Command: []string{exe}, Tools: []string{"cwd"},
		Env:     []string{"GATEBRIDGE_TEST_MCP_SERVER=1", "GATEBRIDGE_TEST_MCP_ENVTOOL=1"},
		Isolate: gates.IsolateSpec{Host: true}}
	for _, tc := range []struct {
		untrusted []string
		want      string
	}{{[]string{ws}, "/"}, {[]string{t.TempDir()}, ws}} {
		reg := gates.NewRegistry()
		if _, err := mcpKind(t).Add(context.Background(), reg, srv, gates.Env{Untrusted: tc.untrusted}); err != nil {
			t.Fatal(err)
		}
		if _, out, _ := call(t, reg, "t_cwd", ""); strings.TrimSpace(out) != tc.want {
			t.Errorf("untrusted %v: the server's working directory is %q, want %s", tc.untrusted, out, tc.want)
		}
		reg.Close()
	}
}
