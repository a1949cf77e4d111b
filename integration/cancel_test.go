package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

// TestSignalCancelsCommandGate: `timeout 1 GATE` inside the sandbox
// returns 124 to the caller, and the host stops the gate: the command
// gate's whole process group (here a background grandchild) is gone long
// before the run ends, and the call is recorded as canceled. With the wake
// FIFO the host sees the wrapper gone; polling (Docker Desktop) it sees
// the wrapper's cancel marker.
func TestSignalCancelsCommandGate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		for i, mode := range []string{"fifo", "poll"} {
			t.Run(mode, func(t *testing.T) {
				marker := fmt.Sprintf("41.%d%d", map[string]int{"local": 1, "bwrap": 2, "docker": 3}[backend], i)
				cfg := fmt.Sprintf(`
gates:
  commands:
    - name: slowtree
      command: [sh, -c, "sleep %s & wait"]
      timeout: 60s
`, marker)
				var (
					wg  sync.WaitGroup
					res JSONResult
					out Out
				)
				wg.Add(1)
				var ended time.Time
				go func() {
					defer wg.Done()
					res, out = gbJSON(t, backend, Run{Config: cfg, Command: []string{"sh", "-c",
						"GATEBRIDGE_WAKE=" + mode + " timeout -s TERM 1 slowtree; echo rc=$?; sleep 4; echo end"}})
					ended = time.Now()
				}()
				if !sandboxtest.Poll(30*time.Second, func() bool { return len(sleepPids(marker)) > 0 }) {
					wg.Wait()
					t.Fatalf("the gate never started: %+v %q", res, out.Stderr)
				}
				started := time.Now()
				gone := sandboxtest.Poll(20*time.Second, func() bool { return len(sleepPids(marker)) == 0 })
				goneAt := time.Now()
				wg.Wait()
				if !gone {
					t.Fatalf("the gate's grandchild outlived the run")
				}
				t.Logf("grandchild gone %v after it started (timeout 1 s), run ended %v later", goneAt.Sub(started), ended.Sub(goneAt))
				if ended.Sub(goneAt) < 2*time.Second {
					t.Errorf("the gate's process group was killed at the end of the run, not when its caller went away")
				}
				// coreutils timeout says 124; busybox's (the docker test
				// image) passes on the wrapper's 143.
				if (res.Stdout != "rc=124\nend\n" && res.Stdout != "rc=143\nend\n") || len(res.Calls) != 1 || res.Calls[0].Decision != "canceled" {
					t.Errorf("stdout %q calls %+v stderr %q", res.Stdout, res.Calls, out.Stderr)
				}
			})
		}
	})
}

// TestStreamingCommandGate: a command gate's first line reaches the caller
// while the gate still runs (it sleeps 3 s before the second), on every
// backend; the output is complete and in order.
func TestStreamingCommandGate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		cfg := `
gates:
  commands:
    - name: slowlines
      command: [sh, -c, "echo one; sleep 3; echo two"]
      timeout: 30s
`
		res, out := gbJSON(t, backend, Run{Config: cfg, Command: []string{"sh", "-c",
			// /proc/uptime in centiseconds: every image has it, not every date has %N.
			`cs() { read -r u _ < /proc/uptime; echo "${u%.*}${u#*.}"; }
s=$(cs); slowlines 2>&1 | { IFS= read -r l; e=$(cs); echo "first=$l ms=$(( (e-s)*10 ))"; cat; }`}})
		var first string
		var ms int
		if _, err := fmt.Sscanf(res.Stdout, "first=%s ms=%d\n", &first, &ms); err != nil || first != "one" {
			t.Fatalf("stdout %q (%v), stderr %q %q", res.Stdout, err, res.Stderr, out.Stderr)
		}
		t.Logf("first line after %d ms (the gate sleeps 3 s before the second)", ms)
		if ms > 1500 {
			t.Errorf("first line reached the caller after %d ms: not streamed", ms)
		}
		if want := fmt.Sprintf("first=one ms=%d\ntwo\n", ms); res.Stdout != want {
			t.Errorf("stdout %q, want %q", res.Stdout, want)
		}
	})
}

// TestPipeClosedCancelsGate: `gate | head -1` stops the gate once head has
// gone: the wrapper's next write of streamed output meets a closed pipe
// (SIGPIPE), and the host cancels the gate instead of letting it run 30 s.
func TestPipeClosedCancelsGate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		cfg := `
gates:
  commands:
    - name: chatty
      command: [sh, -c, "echo one; sleep 1; echo two; sleep 30; echo three"]
      timeout: 60s
`
		res, out := gbJSON(t, backend, Run{Config: cfg, Command: []string{"sh", "-c", `chatty | head -1`}})
		if res.Stdout != "one\n" || len(res.Calls) != 1 {
			t.Fatalf("stdout %q calls %+v stderr %q %q", res.Stdout, res.Calls, res.Stderr, out.Stderr)
		}
		c := res.Calls[0]
		t.Logf("gate ran %.0f ms, decision %s", c.DurationMS, c.Decision)
		if c.Decision != "canceled" || c.DurationMS > 15000 {
			t.Errorf("call %+v: want canceled soon after the second line", c)
		}
	})
}

// TestSignalCancelsBuiltinGate: a built-in gate (search with a slow
// pattern over 20 MB, seconds of work) stops soon after its caller is
// killed, recorded as canceled, instead of running to its end.
func TestSignalCancelsBuiltinGate(t *testing.T) {
	needBackend(t, "local")
	ws := workspace(t)
	line := strings.Repeat("abcdefghij", 7) + "\n"
	data := strings.Repeat(line, (4<<20)/len(line))
	for i := range 5 {
		if err := os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%d.txt", i)), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, out := gbJSON(t, "local", Run{Dir: ws, Command: []string{"sh", "-c",
		`search '\w{20,40}zzz' & p=$!; sleep 0.3; kill -TERM $p; wait $p; echo "rc=$?"; sleep 3`}})
	if res.Stdout != "rc=143\n" || len(res.Calls) != 1 {
		t.Fatalf("stdout %q calls %+v stderr %q %q", res.Stdout, res.Calls, res.Stderr, out.Stderr)
	}
	c := res.Calls[0]
	t.Logf("search ran %.0f ms before it stopped (decision %s)", c.DurationMS, c.Decision)
	// Not the end of the run (3 s later) but the caller going away.
	if c.Decision != "canceled" || !strings.Contains(c.Error, "caller went away") || c.DurationMS > 2500 {
		t.Errorf("call %+v: want canceled within a few hundred ms of the kill", c)
	}
}
