package bridge

import (
	"testing"
	"time"
)

// Every call must be answered through events, never by waiting for the
// rescan: with the rescan an hour away and 300 sequential calls (more than
// the 128 call dirs a session watches at once), a leaked watch slot would
// leave calls unanswered and the run would hit its deadline.
func TestEventsNeverNeedRescan(t *testing.T) {
	start := time.Now()
	res := run(t, Config{Watch: WatchEvents, RescanInterval: time.Hour},
		`i=0; while [ $i -lt 300 ]; do t_echo x > /dev/null || exit 1; i=$((i+1)); done; echo done`)
	if res.Stdout != "done\n" || len(res.Calls) != 300 {
		t.Fatalf("stdout %q, %d calls, stderr %q", res.Stdout, len(res.Calls), res.Stderr)
	}
	if d := time.Since(start); d > 45*time.Second {
		t.Fatalf("300 calls took %v: calls waited for a rescan", d)
	}
}
