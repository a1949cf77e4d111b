package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatebridge/gatebridge/bridge/rpc"
)

// TestServeImageRefused: with sandbox.docker.images set, serve's
// sandbox/open refuses an image outside the list, spelled as a trick (a
// registry host in front of the default's name, upper case, a tag beside
// a digest), naming the key; the default image, spelled in full, opens.
func TestServeImageRefused(t *testing.T) {
	needBackend(t, "docker")
	conf := filepath.Join(t.TempDir(), "gatebridge.yaml")
	if err := os.WriteFile(conf, []byte("sandbox:\n  docker:\n    images: [\"busybox:1.36\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, nil, "--config", conf)
	for i, img := range []string{
		"evil.com/gatebridge-test:latest",
		"127.0.0.1:1/gatebridge-test:latest",
		"GATEBRIDGE-TEST:latest",
		"busybox:1.36@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"busybox:latest",
	} {
		e := s.CallErr(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "bad" + string(rune('a'+i)), Backend: "docker", Image: img, Workspace: workspace(t)})
		if e == nil || !strings.Contains(e.Message, "sandbox.docker.images") {
			t.Errorf("image %s: %+v; want refused naming sandbox.docker.images", img, e)
		}
	}
	var open rpc.SandboxOpenResult
	s.Call(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: "ok", Backend: "docker", Image: "docker.io/library/gatebridge-test:latest", Workspace: workspace(t)}, &open)
	o := s.Run("ok", "p", nil, "sh", "-c", "echo ran")
	if o.Exited.ExitCode != 0 || string(o.Stdout) != "ran\n" {
		t.Fatalf("default image: exit %d stdout %q stderr %q", o.Exited.ExitCode, o.Stdout, o.Stderr)
	}
}
