package sandbox

import (
	"bytes"
	"context"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// reaperList returns the group ids the reaper's list holds now.
func reaperList(t *testing.T) []int {
	t.Helper()
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	if reaper.list == nil {
		return nil
	}
	b, err := io.ReadAll(io.NewSectionReader(reaper.list, 0, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if len(b)%reaperSlot != 0 {
		t.Fatalf("list of %d bytes is not whole %d-byte lines: %q", len(b), reaperSlot, b)
	}
	var ids []int
	for line := range bytes.Lines(b) {
		if f := strings.TrimSpace(string(line)); f != "" {
			id, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("list line %q", line)
			}
			ids = append(ids, id)
		}
	}
	return ids
}

// A command's process group is on the reaper's list while it runs and
// off it once it is gone: a group id left listed could be reused by an
// unrelated group, which the reaper would kill if gatebridge died.
func TestReaperListsRunningGroups(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan *Result, 1)
	go func() {
		res, err := NewLocal().Run(ctx, &Spec{Command: []string{"sh", "-c", "echo $$; exec sleep 30"}, Stdout: out, Workspace: t.TempDir()})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	var pgid int
	for deadline := time.Now().Add(10 * time.Second); pgid == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the command never printed its pid")
		}
		pgid, _ = strconv.Atoi(strings.TrimSpace(out.String()))
	}
	if ids := reaperList(t); !slices.Contains(ids, pgid) {
		t.Errorf("while it runs, group %d is not listed: %v", pgid, ids)
	}
	cancel()
	<-done
	if ids := reaperList(t); slices.Contains(ids, pgid) {
		t.Errorf("after it ended, group %d is still listed: %v", pgid, ids)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
