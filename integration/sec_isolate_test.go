package integration

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox/bwrap"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

// Gates run in a sandbox of their own (issue 28 §3): these tests perform
// the attacks through the gatebridge binary. The gates' isolation needs
// bwrap (skipped without it, failed where GATEBRIDGE_REQUIRE_BACKENDS
// names bwrap); the sandboxed command runs under bwrap too, but what is
// tested is the gate's own sandbox. Everything a gate should or should not
// reach is placed where its uid (sandbox.gate_uid as root) could reach it on the
// host: only the isolation keeps it out.

// openDir is a fresh directory anyone may write, in a parent anyone may
// traverse.
func openDir(t *testing.T) string {
	t.Helper()
	d := workspace(t)
	must(t, os.Chmod(d, 0o777))
	return d
}

// An isolated gate writes only its isolate.write paths: not a
// world-writable host directory, not its read paths, not its dir; and a
// gate that lets --output through (the policy attack of
// TestSecCommandGateArgs, allowed here) cannot write the host file
// either, because git runs in its sandbox.
func TestSecIsolatedGateWrite(t *testing.T) {
	needBackend(t, "bwrap")
	notGiven, readOnly, writable, dir := openDir(t), openDir(t), openDir(t), openDir(t)
	cfg := fmt.Sprintf(`
gates:
  commands:
    - name: writer
      command: [sh, -c, 'for d in %s %s %s; do echo pwned > "$d/pwned" 2>/dev/null && echo "wrote $d"; done; echo ok > %s/ok && echo wrote-writable']
      dir: %s
      isolate: {read: [%s], write: [%s]}
`, notGiven, readOnly, dir, writable, dir, readOnly, writable)
	out := gb(t, "bwrap", Run{Config: cfg, Command: []string{"writer"}})
	if out.Code != 0 || out.Stdout != "wrote-writable\n" {
		t.Errorf("exit %d stdout %q stderr %q", out.Code, out.Stdout, out.Stderr)
	}
	for _, d := range []string{notGiven, readOnly, dir} {
		if _, err := os.Stat(filepath.Join(d, "pwned")); err == nil {
			t.Errorf("an isolated gate wrote %s/pwned", d)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(writable, "ok")); string(b) != "ok\n" {
		t.Errorf("the write path did not get the file: %q", b)
	}

	t.Run("git --output", func(t *testing.T) {
		repo := gitRepo(t)
		loot := filepath.Join(openDir(t), "authorized_keys")
		cfg := fmt.Sprintf("gates:\n  commands:\n    - name: git_log\n      command: [git, log]\n      options:\n"+
			"        - {name: -n, value: \"[0-9]+\"}\n        - {name: --output, value: \".*\"}\n        - {name: --format, value: \".*\"}\n      dir: %s\n"+
			// git refuses a repository another uid owns unless told.
			"      env: [GIT_CONFIG_COUNT=1, GIT_CONFIG_KEY_0=safe.directory, GIT_CONFIG_VALUE_0=%s]\n"+
			"      isolate: {read: [%s]}\n", repo, repo, repo)
		out := gb(t, "bwrap", Run{Config: cfg, Command: []string{"sh", "-c", fmt.Sprintf(
			`git_log -n 1 --format=%%s; git_log -n 1 --output=%s "--format=format:ssh-ed25519 AAAA attacker"; echo "exit $?"`, loot)}})
		if !strings.HasPrefix(out.Stdout, "first commit\n") || strings.HasSuffix(out.Stdout, "exit 0\n") {
			t.Errorf("stdout %q stderr %q", out.Stdout, out.Stderr)
		}
		if _, err := os.Stat(loot); err == nil {
			t.Error("git wrote the host file from its sandbox")
		}
	})
}

// An isolated gate reads only the system, its read paths and its dir: not
// the session directory or the workspace (whose paths the sandbox hands
// it), not a world-readable host file outside them, not /root; and it does
// not get gatebridge's environment (a token gatebridge holds).
func TestSecIsolatedGateRead(t *testing.T) {
	needBackend(t, "bwrap")
	ws, secretDir := workspace(t), workspace(t)
	must(t, os.WriteFile(filepath.Join(ws, "ws.txt"), []byte("WORKSPACE-FILE\n"), 0o644))
	secret := filepath.Join(secretDir, "secret.txt")
	must(t, os.WriteFile(secret, []byte("HOST-SECRET\n"), 0o644))
	cfg := fmt.Sprintf(`
gates:
  commands:
    - name: peek
      command: [sh, -c, 'for p in "$@" %s /root; do ls -A "$p"; cat "$p"/* "$p"; done 2>&1; env', x]
      allow_pattern: "/.*"
`, secret)
	// The sandbox passes its session directory and the workspace.
	out := gb(t, "bwrap", Run{Dir: ws, Config: cfg, Env: []string{"GB_ISO_TOKEN=s3cret-gatebridge-env"},
		Command: []string{"sh", "-c", `peek "$(dirname "$GATEBRIDGE_CALLS_DIR")" "$PWD"`}})
	if out.Code != 0 {
		t.Fatalf("exit %d stdout %q stderr %q", out.Code, out.Stdout, out.Stderr)
	}
	for _, leak := range []string{"WORKSPACE-FILE", "ws.txt", "HOST-SECRET", "calls", "responses", "s3cret-gatebridge-env"} {
		if strings.Contains(out.Stdout, leak) {
			t.Errorf("the isolated gate saw %q:\n%s", leak, out.Stdout)
		}
	}
	// Control: listed, the workspace is readable (it was not the uid).
	cfg += fmt.Sprintf("      isolate: {read: [%s]}\n", ws)
	out = gb(t, "bwrap", Run{Dir: ws, Config: cfg, Command: []string{"sh", "-c", `peek "$PWD"`}})
	if !strings.Contains(out.Stdout, "WORKSPACE-FILE") {
		t.Errorf("control: the listed workspace is not readable: %q %q", out.Stdout, out.Stderr)
	}
}

// An isolated gate has no network unless isolate.network: a listener of
// this test on the host's 127.0.0.1 gets nothing; with network: true it
// gets the gate's line. The same for a stdio MCP server.
func TestSecIsolatedGateNetwork(t *testing.T) {
	needBackend(t, "bwrap")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer ln.Close()
	got := make(chan string, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, _ := io.ReadAll(io.LimitReader(c, 64))
			c.Close()
			got <- string(b)
		}
	}()
	addr := ln.Addr().String()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	srv := testMCPServer(t)
	for _, network := range []bool{false, true} {
		cfg := fmt.Sprintf(`
gates:
  commands:
    - name: dial
      command: [bash, -c, 'echo hello > /dev/tcp/127.0.0.1/%s && echo connected']
      isolate: {network: %v}
mcp:
  servers:
    calc:
      command: [%s]
      isolate: {network: %v}
`, port, network, srv, network)
		out := gb(t, "bwrap", Run{Config: cfg, Command: []string{"sh", "-c", "dial; calc_probe dial=" + addr}})
		n, wait := 0, time.After(300*time.Millisecond)
		if network {
			wait = time.After(10 * time.Second)
		}
	count:
		for n < 2 {
			select {
			case <-got:
				n++
			case <-wait:
				break count
			}
		}
		if !network && (strings.Contains(out.Stdout, "connected") || strings.Contains(out.Stdout, "dial ok") || n > 0) {
			t.Errorf("without network the gates reached the host's loopback (%d connections): %q %q", n, out.Stdout, out.Stderr)
		}
		if network && (!strings.Contains(out.Stdout, "connected") || !strings.Contains(out.Stdout, "dial ok") || n != 2) {
			t.Errorf("with network: %d connections, stdout %q stderr %q", n, out.Stdout, out.Stderr)
		}
	}
}

// Nothing an isolated gate starts outlives its call: a background child
// and one in a new session (setsid), when the gate returns, when it times
// out, and when its caller goes away (canceled); nor what an isolated MCP
// server starts, once the run is over.
func TestSecIsolatedGateLeftovers(t *testing.T) {
	needBackend(t, "bwrap")
	marker := func() string { return fmt.Sprintf("%d.%d", 700+rand.IntN(99), rand.IntN(1000000)) }
	for _, tc := range []struct {
		name, gate, timeout, call string
		code                      int
	}{
		{"return", "sleep %[1]s & setsid sleep %[1]s & echo started", "30s", "spawn; echo rc=$?", 0},
		{"timeout", "sleep %[1]s & setsid sleep %[1]s & echo started; sleep %[1]s", "2s", "spawn; echo rc=$?", 124},
		{"cancel", "sleep %[1]s & setsid sleep %[1]s & echo started; sleep %[1]s", "60s", "timeout -s TERM 2 spawn; echo rc=$?", 124},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := marker()
			t.Cleanup(func() { sandboxtest.KillMarked(m) })
			cfg := fmt.Sprintf("gates:\n  commands:\n    - name: spawn\n      command: [sh, -c, '%s']\n      timeout: %s\n", fmt.Sprintf(tc.gate, m), tc.timeout)
			// The run goes on a second after the call: the gate's children
			// must be gone by then, not merely at the end of the run.
			out := gb(t, "bwrap", Run{Config: cfg, Command: []string{"sh", "-c", tc.call + fmt.Sprintf(`; sleep 1; for p in /proc/[0-9]*; do [ "$(tr '\0' ' ' < $p/cmdline 2>/dev/null)" = "sleep %s " ] && echo left; done; echo end`, m)}})
			if !strings.HasPrefix(out.Stdout, "started\n") || !strings.Contains(out.Stdout, fmt.Sprintf("rc=%d\n", tc.code)) {
				t.Errorf("stdout %q stderr %q", out.Stdout, out.Stderr)
			}
			if left := sleepPids(m); len(left) > 0 || strings.Contains(out.Stdout, "left") {
				t.Errorf("the gate's children outlived its call: %v %q", left, out.Stdout)
			}
		})
	}
	t.Run("mcp server", func(t *testing.T) {
		m := marker()
		t.Cleanup(func() { sandboxtest.KillMarked(m) })
		cfg := "mcp:\n  servers:\n    calc:\n      command: [" + testMCPServer(t) + "]\n"
		out := gb(t, "bwrap", Run{Config: cfg, Command: []string{"calc_probe", "sleep=" + m}})
		if !strings.Contains(out.Stdout, "sleep ok") {
			t.Fatalf("stdout %q stderr %q", out.Stdout, out.Stderr)
		}
		if left := sleepPids(m); len(left) > 0 {
			t.Errorf("what the MCP server started outlived the run: %v", left)
		}
	})
}

// An isolated gate never runs as root: as root, as sandbox.gate_uid,
// with no capabilities and no new privileges; an isolated MCP server the
// same, and it cannot write outside isolate.write either.
func TestSecIsolatedGateNotRoot(t *testing.T) {
	needBackend(t, "bwrap")
	open := openDir(t)
	cfg := fmt.Sprintf(`
gates:
  commands:
    - name: gb_whoami
      command: [sh, -c, 'id -u; grep -E "^(CapEff|NoNewPrivs):" /proc/self/status | tr -s "\t" " "']
mcp:
  servers:
    calc:
      command: [%s]
`, testMCPServer(t))
	out := gb(t, "bwrap", Run{Config: cfg, Command: []string{"sh", "-c", "gb_whoami; calc_probe write=" + open + "/pwned"}})
	want := strconv.Itoa(os.Getuid())
	if os.Getuid() == 0 {
		want = strconv.Itoa(bwrap.GateUID) // not sandbox.uid (65534)
	}
	for _, w := range []string{want + "\n", "CapEff: 0000000000000000\n", "NoNewPrivs: 1\n", "write failed", "uid " + want} {
		if !strings.Contains(out.Stdout, w) {
			t.Errorf("missing %q in stdout %q (stderr %q)", w, out.Stdout, out.Stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(open, "pwned")); err == nil {
		t.Error("the isolated MCP server wrote a host file")
	}
}
