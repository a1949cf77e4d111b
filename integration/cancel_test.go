package integration

import (
	"fmt"
	"sync"
	"testing"
	"time"
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
				if !waitFor(30*time.Second, func() bool { return len(sleepPids(marker)) > 0 }) {
					wg.Wait()
					t.Fatalf("the gate never started: %+v %q", res, out.Stderr)
				}
				started := time.Now()
				gone := waitFor(20*time.Second, func() bool { return len(sleepPids(marker)) == 0 })
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
