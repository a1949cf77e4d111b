package rpc_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/sandbox/docker"
)

// What the shell's description says about /tmp and the network is what a
// command finds, on every backend that can run here (friction 3: the
// text said files persist next to "(read-only)", and nothing about /tmp
// or the network): one command leaves a file in /tmp, the next looks for
// it; /proc/net/dev lists an interface besides lo only with a network.
func TestDescribeShellIsTrue(t *testing.T) {
	opts := testOptions(t)
	if err := docker.Register(opts.Backends); err != nil {
		t.Fatal(err)
	}
	names := testBackends(t)
	if e, err := opts.Backends.Lookup(docker.Name); err == nil {
		if b, err := e.New(opts.Settings); err == nil && e.Usable(context.Background(), b) == nil {
			names = append(names, docker.Name)
		} else {
			t.Logf("docker skipped: %v", err)
		}
	}
	h := control.New(opts.Options)
	for _, name := range names {
		for _, writable := range []bool{false, true} {
			sb, err := h.Open(context.Background(), control.SandboxSpec{ID: "d", Backend: name, Workspace: traversableTempDir(t), Writable: writable})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			text := sb.DescribeShell()
			run := func(script string) string {
				var out bytes.Buffer
				p, err := sb.Start(context.Background(), control.ProcessSpec{ID: "p", Script: script, Stdout: &out})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				p.Wait(context.Background())
				return strings.TrimSpace(out.String())
			}
			probe := "/tmp/gb-describe-" + name
			run("rm -f " + probe + "; echo x > " + probe)
			kept := run("test -e "+probe+" && echo kept; rm -f "+probe) == "kept"
			netIfs := run(`tail -n +3 /proc/net/dev | awk -F: '{gsub(/ /, "", $1); if ($1 != "lo") print $1}'`)
			wsWrite := run("echo y > w 2>/dev/null && echo wrote")
			sb.Close()
			t.Logf("%s (writable %v): %s", name, writable, text)

			if saysKept := strings.Contains(text, "/tmp is kept") || strings.Contains(text, "/tmp is the host's own, kept"); saysKept != kept {
				t.Errorf("%s: the text says %q; a file in /tmp kept for the next call: %v", name, text, kept)
			}
			if saysNone := strings.Contains(text, "There is no network"); saysNone != (netIfs == "") {
				t.Errorf("%s: the text says %q; interfaces besides lo: %q", name, text, netIfs)
			}
			if saysRO := strings.Contains(text, "The workspace is read-only"); saysRO == (wsWrite == "wrote") {
				t.Errorf("%s (writable %v): the text says %q; a command wrote the workspace: %v", name, writable, text, wsWrite == "wrote")
			}
		}
	}
}
