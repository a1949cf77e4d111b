//go:build linux

package agent_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/agent"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

// startAgent prepares a directory, runs a real agent on it in this
// process, and dials it.
func startAgent(t *testing.T) (*agent.Conn, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "agent")
	if err := agent.Prepare(dir, -1, -1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- agent.Serve(ctx, agent.Options{Dir: dir}) }()
	c, err := agent.Dial(context.Background(), dir, agent.DialOptions{Wait: 5 * time.Second})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		cancel()
		if err := <-served; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	return c, dir
}

// startShAgent is startAgent with the sh agent, run by shell.
func startShAgent(t *testing.T, shell string) (*agent.Conn, string) {
	t.Helper()
	c, dir, _ := startShAgentCmd(t, shell)
	return c, dir
}

// startShAgentCmd is startShAgent, also returning the agent's process,
// which leads a process group of its own (as a container's first process
// does): its runners are in it, its commands each in a session of their
// own.
func startShAgentCmd(t *testing.T, shell string) (*agent.Conn, string, *exec.Cmd) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "agent")
	if err := agent.Prepare(dir, -1, -1); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(shell, "-c", agent.ShScript, "gatebridge-agent", dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	}
	c, err := agent.Dial(context.Background(), dir, agent.DialOptions{Wait: 5 * time.Second})
	if err != nil {
		stop()
		t.Fatalf("%v; agent stderr: %s", err, stderr.String())
	}
	t.Cleanup(func() {
		c.Close()
		stop()
		if t.Failed() {
			t.Logf("sh agent stderr: %s", stderr.String())
		}
	})
	return c, dir, cmd
}

// TestConformanceSh: the sh agent passes the same suite, under dash and
// busybox sh (the shells of minimal images).
func TestConformanceSh(t *testing.T) {
	for _, shell := range []string{"/bin/dash", "/bin/busybox"} {
		if _, err := os.Stat(shell); err != nil {
			t.Logf("%s: not installed", shell)
			continue
		}
		t.Run(filepath.Base(shell), func(t *testing.T) {
			sh := shell
			if filepath.Base(shell) == "busybox" {
				// busybox runs as sh when called so.
				dir := t.TempDir()
				sh = filepath.Join(dir, "sh")
				if err := os.Symlink(shell, sh); err != nil {
					t.Fatal(err)
				}
			}
			c, _ := startShAgent(t, sh)
			sandboxtest.Run(t, func(*testing.T) sandbox.Backend {
				return writable{&agent.Attached{Conn: c, Root: "/"}}
			}, sandboxtest.Options{})
		})
	}
}

// writable runs every spec with a writable workspace: an attached
// sandbox's mounts are its own (the suite's isolation checks are off).
type writable struct{ *agent.Attached }

func (w writable) Run(ctx context.Context, spec *sandbox.Spec) (*sandbox.Result, error) {
	s := *spec
	s.WorkspaceWritable = true
	s.AllowRoot = true // the test runs as root, and so does its agent
	return w.Attached.Run(ctx, &s)
}

func TestConformance(t *testing.T) {
	c, _ := startAgent(t)
	sandboxtest.Run(t, func(*testing.T) sandbox.Backend {
		return writable{&agent.Attached{Conn: c, Root: "/"}}
	}, sandboxtest.Options{})
}

func TestMain(m *testing.M) {
	os.Exit(m.Run())
}

// TestRelativeCommand: a command named by a path relative to its working
// directory runs, from both agents (the first Go agent looked it up from
// its own directory and answered 127).
func TestRelativeCommand(t *testing.T) {
	for name, start := range map[string]func(t *testing.T) *agent.Conn{
		"go": func(t *testing.T) *agent.Conn { c, _ := startAgent(t); return c },
		"sh": func(t *testing.T) *agent.Conn { c, _ := startShAgent(t, "/bin/sh"); return c },
	} {
		t.Run(name, func(t *testing.T) {
			c := start(t)
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "tool"), []byte("#!/bin/sh\necho ran here\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			res, err := c.Run(context.Background(), agent.Command{Argv: []string{"./tool"}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: dir}, &sandbox.Spec{})
			if err != nil || res.ExitCode != 0 || string(res.Stdout) != "ran here\n" {
				t.Fatalf("%v %+v", err, res)
			}
		})
	}
}
