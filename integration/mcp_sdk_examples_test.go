package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

var sdkExamples struct {
	once sync.Once
	dir  string
	err  error
	out  []byte
}

// sdkExample builds an example program of the MCP Go SDK's own module
// (github.com/modelcontextprotocol/go-sdk/examples/…, at the version
// go.mod pins, from the module cache: offline) once, outside any
// workspace, and returns its path.
func sdkExample(t *testing.T, pkg string) string {
	t.Helper()
	sdkExamples.once.Do(func() {
		sdkExamples.dir, sdkExamples.err = os.MkdirTemp("", "gb-sdk-examples-")
		if sdkExamples.err != nil {
			return
		}
		os.Chmod(sdkExamples.dir, 0o755)
		_, file, _, _ := runtime.Caller(0)
		for _, p := range []string{"server/hello", "client/listfeatures"} {
			build := exec.Command("go", "build", "-o", filepath.Join(sdkExamples.dir, filepath.Base(p)),
				"github.com/modelcontextprotocol/go-sdk/examples/"+p)
			build.Dir = filepath.Dir(filepath.Dir(file))
			if sdkExamples.out, sdkExamples.err = build.CombinedOutput(); sdkExamples.err != nil {
				return
			}
		}
	})
	if sdkExamples.err != nil {
		t.Fatalf("build the SDK's examples: %v\n%s", sdkExamples.err, sdkExamples.out)
	}
	return filepath.Join(sdkExamples.dir, filepath.Base(pkg))
}

// TestMCPSDKExamples: gatebridge against the SDK's own example programs,
// not only servers and clients we wrote. Its listfeatures client lists
// `gatebridge mcp`'s tools over stdio; its hello server's greet tool is a
// gate in a sandbox (typed argument from key=value, --help).
func TestMCPSDKExamples(t *testing.T) {
	lf := sdkExample(t, "client/listfeatures")
	hello := sdkExample(t, "server/hello")
	t.Cleanup(func() { os.RemoveAll(sdkExamples.dir) }) // built once: this is their only test

	t.Run("listfeatures-lists-gatebridge-mcp", func(t *testing.T) {
		needBackend(t, "bwrap")
		ws := workspace(t)
		cmd := exec.Command(lf, binary, "mcp", "--sandbox", "bwrap", "--workspace", ws)
		cmd.Dir = ws
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "tools:\n\tbash\n") {
			t.Fatalf("listfeatures: %v\n%s", err, out)
		}
	})
	t.Run("hello-server-as-gate", func(t *testing.T) {
		cfg := "mcp:\n  servers:\n    hello:\n      command: [" + hello + "]\n"
		forEachBackend(t, func(t *testing.T, backend string) {
			out := gb(t, backend, Run{Config: cfg, Command: []string{"sh", "-c",
				`hello_greet name=World; hello_greet --help | head -1; hello_greet nme=x; echo "rc=$?"`}})
			want := "Hi World\nusage: hello_greet name=…\nrc=2\n"
			if out.Code != 0 || out.Stdout != want {
				t.Fatalf("exit %d\nstdout %q\nwant   %q\nstderr %s", out.Code, out.Stdout, want, out.Stderr)
			}
		})
	})
}
