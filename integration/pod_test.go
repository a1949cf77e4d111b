package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

// TestSidecarPod reproduces deploy/k8s's pod with the Docker engine (no
// Kubernetes here): a sidecar container running `gatebridge serve
// --listen --attach` and a sandbox container running `gatebridge agent`,
// sharing a volume and one network namespace (network_mode
// container:…, as a pod's containers do), on an internal network. The
// sandbox has no exec API and no docker socket: every command goes
// through the shared volume. A Python runtime on the host drives it over
// TCP with the token (integration/testdata/pod_client.py): commands,
// the built-in and its own gates, streaming and stdin; from inside, the
// sidecar's port without the token and the outside are tried.
//
// "Outside": an internal docker network has no route out; the host's own
// addresses are another matter (docker leaves them reachable), so the
// test adds what the pod's NetworkPolicy (no egress) does in Kubernetes:
// an iptables rule rejecting connections the pod opens to the host.
func TestSidecarPod(t *testing.T) {
	needBackend(t, "docker")
	needRoot(t)
	for _, tool := range []string{"docker", "python3", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			if required("docker") {
				t.Fatalf("%s is needed for the pod reproduction: %v", tool, err)
			}
			t.Skipf("no %s", tool)
		}
	}
	tag := fmt.Sprintf("gbpod-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	cleanup := func(args ...string) {
		_ = exec.Command("docker", args...).Run()
	}

	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("pod-token-"+tag+"-7d1e4b2a9c0f5e38d6a1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(dir, "workspace")
	os.Mkdir(ws, 0o777)
	os.Chmod(ws, 0o777)
	os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hello from the workspace\n"), 0o644)
	// The protected path (sandbox.protected_paths, default .git): the pod
	// mounts it read-only in the sandbox (deploy/k8s: a readOnly subPath
	// mount) and the sidecar declares it.
	const gitConfig = "[core]\n\tbare = false\n"
	os.MkdirAll(filepath.Join(ws, ".git"), 0o777)
	os.Chmod(filepath.Join(ws, ".git"), 0o777)
	os.WriteFile(filepath.Join(ws, ".git", "config"), []byte(gitConfig), 0o666)
	os.Chmod(filepath.Join(ws, ".git", "config"), 0o666)
	// A repository cloned into the workspace: its .git is not mounted
	// read-only, so a writable sandbox on it is refused.
	os.MkdirAll(filepath.Join(ws, "sub", ".git"), 0o777)

	network := tag + "-net"
	run("network", "create", "--internal", "--label", "io.gatebridge.test="+tag, network)
	t.Cleanup(func() { cleanup("network", "rm", network) })
	vol := tag + "-vol"
	run("volume", "create", "--label", "io.gatebridge.test="+tag, vol)
	t.Cleanup(func() { cleanup("volume", "rm", "-f", vol) })

	// The init container's copy of the binary is a read-only bind here.
	bin := binary + ":/opt/gatebridge/bin/gatebridge:ro"
	sidecarArgs := func(name string, env ...string) []string {
		args := []string{"run", "--name", name, "--label", "io.gatebridge.test=" + tag,
			"--network", network, "--read-only", "--security-opt", "no-new-privileges",
			"--cap-drop", "ALL", "--cap-add", "CHOWN", "--cap-add", "FOWNER", "--cap-add", "DAC_OVERRIDE",
			"--user", "0:0", "--pids-limit", "256", "--memory", "512m",
			"-v", bin, "-v", vol + ":/gatebridge", "-v", ws + ":/workspace", "-v", token + ":/run/gatebridge/token:ro",
			"--tmpfs", "/tmp"}
		for _, e := range env {
			args = append(args, "-e", e)
		}
		return append(args, "--entrypoint", "/opt/gatebridge/bin/gatebridge", "gatebridge-test:latest",
			"serve", "--listen", "0.0.0.0:7800", "--token-file", "/run/gatebridge/token", "--attach", "/gatebridge")
	}
	// Without the declaration the sidecar refuses to start: nothing it can
	// see says the sandbox cannot write .git.
	undeclared := tag + "-undeclared"
	t.Cleanup(func() { cleanup("rm", "-f", undeclared) })
	out, err := exec.Command("docker", sidecarArgs(undeclared)...).CombinedOutput()
	if code := exitCode(err); code != 125 || !strings.Contains(string(out), "protected path .git (sandbox.protected_paths) is not declared read-only") {
		t.Fatalf("sidecar without GATEBRIDGE_SANDBOX_ATTACH_READ_ONLY_PATHS: exit %d (%v), want 125 and the refusal:\n%s", code, err, out)
	}
	sidecar := tag + "-sidecar"
	run(append([]string{"run", "-d"}, sidecarArgs(sidecar, "GATEBRIDGE_SANDBOX_ATTACH_READ_ONLY_PATHS=/workspace/.git")[1:]...)...)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("docker", "logs", sidecar).CombinedOutput()
			t.Logf("sidecar logs:\n%s", out)
		}
		cleanup("rm", "-f", sidecar)
	})
	sandboxName := tag + "-sandbox"
	run("run", "-d", "--name", sandboxName, "--label", "io.gatebridge.test="+tag,
		"--network", "container:"+sidecar, "--read-only", "--security-opt", "no-new-privileges",
		"--cap-drop", "ALL", "--user", "65532:65532", "--pids-limit", "256", "--memory", "512m",
		"-v", bin, "-v", vol+":/gatebridge", "-v", ws+":/workspace", "-v", filepath.Join(ws, ".git")+":/workspace/.git:ro",
		"--tmpfs", "/tmp",
		"--entrypoint", "/opt/gatebridge/bin/gatebridge", "gatebridge-test:latest",
		"agent", "--dir", "/gatebridge/agent")
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("docker", "logs", sandboxName).CombinedOutput()
			t.Logf("sandbox logs:\n%s", out)
		}
		cleanup("rm", "-f", sandboxName)
	})

	ip := run("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", sidecar)
	if net.ParseIP(ip) == nil {
		t.Fatalf("sidecar address %q", ip)
	}
	// What the NetworkPolicy's empty egress does: connections the pod
	// opens to the host are rejected (replies to the runtime's own pass).
	rule := []string{"INPUT", "-s", ip, "-m", "conntrack", "--ctstate", "NEW", "-m", "comment", "--comment", tag, "-j", "REJECT"}
	if out, err := exec.Command("iptables", append([]string{"-I"}, rule...)...).CombinedOutput(); err != nil {
		t.Fatalf("iptables: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("iptables", append([]string{"-D"}, rule...)...).Run() })

	// A listener on the host, outside the pod, that the sandbox must not
	// reach; and one in a container on the default network.
	hostL, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostL.Close()
	go func() {
		for {
			c, err := hostL.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	hostIP := outboundIP(t)
	other := tag + "-other"
	run("run", "-d", "--name", other, "--label", "io.gatebridge.test="+tag, "gatebridge-test:latest",
		"sh", "-c", "while true; do echo hi | nc -l -p 7900; done")
	t.Cleanup(func() { cleanup("rm", "-f", other) })
	otherIP := run("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", other)

	// The sidecar listens once it is up.
	if !sandboxtest.Poll(30*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", ip+":7800", time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		t.Fatal("the sidecar does not listen on 7800")
	}

	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "testdata", "pod_client.py")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "python3", script, ip, "7800", token)
	cmd.Env = append(os.Environ(), fmt.Sprintf("POD_OUTSIDE=%s:%d,%s:7900", hostIP, hostL.Addr().(*net.TCPAddr).Port, otherIP))
	out, err = cmd.CombinedOutput()
	t.Logf("pod client:\n%s", out)
	if err != nil {
		t.Fatalf("pod client: %v", err)
	}
	if n := strings.Count(string(out), "ok "); n < 13 {
		t.Fatalf("only %d checks passed", n)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); string(b) != gitConfig {
		t.Errorf("the sandbox wrote the protected .git/config: %q", b)
	}
}

// exitCode is the exit status in err from exec (0 for nil, -1 if none).
func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}

// outboundIP is an address of this host that the pod could try to reach.
func outboundIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !strings.HasPrefix(n.IP.String(), "172.") {
			return n.IP.String()
		}
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	t.Fatal("no host address")
	return ""
}
