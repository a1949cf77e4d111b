package bridge

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
)

// A dead session that something still writes to (a process of a persistent
// sandbox whose cwd is in its calls/, nesting directories faster than the
// host removes them) costs a start at most openPruneTime: Open prunes it
// within that and goes on; what is left waits for the next prune.
func TestOpenPruneBounded(t *testing.T) {
	dir, err := os.MkdirTemp(mailbox.DefaultDir(), "gbtest-open-")
	if err != nil {
		t.Fatal(err)
	}
	defer mailbox.RemoveTree(dir)
	root := filepath.Join(dir, mailbox.SessionPrefix+strings.Repeat("e", 32))
	mustOK(t, os.MkdirAll(filepath.Join(root, "calls"), 0o700))
	mustOK(t, os.WriteFile(root+mailbox.LockSuffix, nil, 0o600)) // free: its owner died
	fd, err := unix.Open(filepath.Join(root, "calls"), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	mustOK(t, err)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				unix.Close(fd)
				return
			default:
			}
			if unix.Mkdirat(fd, "d", 0o700) != nil {
				unix.Close(fd)
				<-stop
				return
			}
			next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				unix.Close(fd)
				<-stop
				return
			}
			unix.Close(fd)
			fd = next
		}
	}()
	time.Sleep(100 * time.Millisecond) // a head start
	start := time.Now()
	var logged strings.Builder
	s, err := Open(Config{Gates: testRegistry(t), Dir: dir, Logf: func(f string, args ...any) {
		logged.WriteString(fmt.Sprintf(f, args...) + "\n")
	}})
	took := time.Since(start)
	close(stop)
	<-done
	mustOK(t, err)
	s.Close()
	t.Logf("Open took %v; logged: %s", took, logged.String())
	if !strings.Contains(logged.String(), "took too long") {
		t.Errorf("Open did not say it left the written session for later")
	}
	if took > openPruneTime+3*time.Second {
		t.Errorf("Open took %v with a written leftover (bound %v)", took, openPruneTime)
	}
	if err := mailbox.RemoveTree(root); err != nil {
		t.Errorf("removing the leftover once the writer stopped: %v", err)
	}
}
