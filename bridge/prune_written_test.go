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
	"github.com/gatebridge/gatebridge/internal/hostilefs"
)

// A dead session that something still writes to (a process of a persistent
// sandbox whose cwd is in its calls/, nesting directories faster than the
// host removes them) costs a start at most openPruneTime: Open prunes it
// within that and goes on; what is left waits for the next prune.
func TestOpenPruneBounded(t *testing.T) {
	dir, err := os.MkdirTemp(DefaultDir(), "gbtest-open-")
	if err != nil {
		t.Fatal(err)
	}
	defer hostilefs.RemoveTree(dir)
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
	if err := hostilefs.RemoveTree(root); err != nil {
		t.Errorf("removing the leftover once the writer stopped: %v", err)
	}
}

// A long-running process (serve) pruned its session parent only at its
// first Open: a session whose removal gave up (something still wrote
// there) and the sessions of gatebridge processes that died meanwhile
// stayed on the tmpfs for as long as it ran. Open now prunes the parent
// again once prunePeriod has passed since the last prune, in the
// background.
func TestOpenPrunesAgain(t *testing.T) {
	dir := t.TempDir()
	s1, err := Open(Config{Gates: testRegistry(t), Dir: dir})
	mustOK(t, err)
	defer s1.Close()
	// A session left after the first prune, whose owner is gone (its lock
	// file is free).
	dead := filepath.Join(dir, mailbox.SessionPrefix+strings.Repeat("f", 32))
	mustOK(t, os.MkdirAll(filepath.Join(dead, "calls", "x"), 0o700))
	mustOK(t, os.WriteFile(dead+mailbox.LockSuffix, nil, 0o600))
	// Within the period, no other prune.
	s2, err := Open(Config{Gates: testRegistry(t), Dir: dir})
	mustOK(t, err)
	s2.Close()
	if _, err := os.Stat(dead); err != nil {
		t.Fatalf("pruned again at once: %v", err)
	}
	old := prunePeriod
	prunePeriod = 0
	defer func() { prunePeriod = old }()
	s3, err := Open(Config{Gates: testRegistry(t), Dir: dir})
	mustOK(t, err)
	defer s3.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := os.Lstat(dead); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still there 10s after an Open past the prune period: the parent is pruned only once per process", dead)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, s := range []*Session{s1, s3} {
		if _, err := os.Stat(s.Dirs().Root); err != nil {
			t.Errorf("a live session was pruned: %v", err)
		}
	}
}
