package docker

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var agentBin struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

// agentBinary builds a static gatebridge once for this test binary (the
// agent runs in the test image, which has no libc).
func agentBinary(t testing.TB) string {
	t.Helper()
	agentBin.once.Do(func() {
		agentBin.dir, agentBin.err = os.MkdirTemp("", "gatebridge-agent-test-")
		if agentBin.err != nil {
			return
		}
		os.Chmod(agentBin.dir, 0o755)
		agentBin.path = filepath.Join(agentBin.dir, "gatebridge")
		cmd := exec.Command("go", "build", "-o", agentBin.path, "../../cmd/gatebridge")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		agentBin.out, agentBin.err = cmd.CombinedOutput()
	})
	if agentBin.err != nil {
		t.Fatalf("build the agent: %v\n%s", agentBin.err, agentBin.out)
	}
	return agentBin.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if agentBin.dir != "" {
		os.RemoveAll(agentBin.dir)
	}
	os.Exit(code)
}
