package bridge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox"
)

// A call directory removed before it became ready must give back its watch
// slot (and the dup'd fd behind it). Otherwise a sandbox that makes and
// removes directories fills the session's 4*max_concurrent+64 slots, and
// every later call waits for the rescan instead of its inotify event.
func TestRemovedCallDirReleasesWatch(t *testing.T) {
	s, err := Open(Config{Gates: testRegistry(t), Dir: t.TempDir(), Watch: WatchEvents, RescanInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	watched := func() int {
		s.srv.mu.Lock()
		defer s.srv.mu.Unlock()
		return len(s.srv.watches)
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !ok(); {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d call dirs still watched", what, watched())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	const n = 20
	for i := range n {
		if err := os.Mkdir(filepath.Join(s.Dirs().Calls, fmt.Sprintf("junk%d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	waitFor("after mkdir", func() bool { return watched() == n })
	for i := range n {
		if err := os.RemoveAll(filepath.Join(s.Dirs().Calls, fmt.Sprintf("junk%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	waitFor("after rmdir", func() bool { return watched() == 0 })
}

// After a cancelled Run the session stops answering calls, so a second Run
// must fail at once instead of running a command whose calls hang.
func TestRunAfterCancelledRunFails(t *testing.T) {
	s, err := Open(Config{Gates: testRegistry(t), Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.Run(ctx, shBackend{}, sandbox.Spec{Command: []string{"true"}})
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	// "true" makes no call, so without the check this returns a result
	// instead of hanging (a gate call here would wait forever under dash).
	res, err := s.Run(ctx2, shBackend{}, sandbox.Spec{Command: []string{"true"}})
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("second Run: err %v, result %+v; want ErrClosed", err, res)
	}
}
