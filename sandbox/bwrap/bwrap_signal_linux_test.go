package bwrap_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox/bwrap"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

// A signal sent as soon as the command runs reaches it even when this
// process has not yet read bwrap's report of the command's pid namespace.
// It was dropped: the Signals conformance case timed out (30 s) in CI
// under load.
func TestBwrapSignalBeforeStatusRead(t *testing.T) {
	b := newBwrap(t)
	defer bwrap.DelayStatus(300 * time.Millisecond)()
	f := sandboxtest.NewFixture(t, sandboxtest.Options{})
	spec := f.Spec("trap 'echo trapped; exit 7' HUP; sleep 10 & wait")
	sigs := make(chan syscall.Signal, 1)
	sigs <- syscall.SIGHUP
	spec.Signals = sigs
	res, err := b.Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 7 || !strings.Contains(string(res.Stdout), "trapped") {
		t.Errorf("exit %d stdout %q stderr %q: the early signal was lost", res.ExitCode, res.Stdout, res.Stderr)
	}
}
