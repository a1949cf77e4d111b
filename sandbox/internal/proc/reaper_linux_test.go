package proc_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/internal/proc"
	"github.com/gatebridge/gatebridge/sandbox/local"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

// reaperList returns the group ids the reaper's list holds now.
func reaperList(t *testing.T) []int {
	t.Helper()
	ids, err := proc.ReaperList()
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// A command's process group is on the reaper's list while it runs and
// off it once it is gone: a group id left listed could be reused by an
// unrelated group, which the reaper would kill if gatebridge died.
func TestReaperListsRunningGroups(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	out := &sandboxtest.Buffer{}
	done := make(chan *sandbox.Result, 1)
	go func() {
		res, err := local.New().Run(ctx, &sandbox.Spec{Command: []string{"sh", "-c", "echo $$; exec sleep 30"}, Stdout: out, Workspace: t.TempDir()})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	var pgid int
	if !sandboxtest.Poll(10*time.Second, func() bool {
		pgid, _ = strconv.Atoi(strings.TrimSpace(out.String()))
		return pgid != 0
	}) {
		t.Fatal("the command never printed its pid")
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
