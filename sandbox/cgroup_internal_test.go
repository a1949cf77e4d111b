//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The thread that starts bwrap joins the limits cgroup so the command is
// inside from its first instruction, and must leave it as soon as bwrap
// has started: a task of gatebridge in the command's memory cgroup is a
// candidate for its OOM killer, and with the cgroup full of tmpfs pages
// (which no kill frees) or of small processes, gatebridge has the largest
// RSS there. It was killed that way (dmesg: "Killed process … (gatebridge)"
// when its run goroutine happened to sit on the main thread). While the
// command runs, no thread of this process is in any of the cgroup's
// hierarchies, and the cgroup is gone after Run.
func TestLimitsCgroupHoldsOnlyTheCommand(t *testing.T) {
	bases, err := cgroupV1Bases()
	if err != nil {
		t.Skipf("no cgroup limits here: %v", err)
	}
	b := &Bwrap{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := b.Check(ctx); err != nil {
		if slices.Contains(strings.Split(os.Getenv("GATEBRIDGE_REQUIRE_BACKENDS"), ","), "bwrap") {
			t.Fatalf("bwrap required but unusable: %v", err)
		}
		t.Skipf("bwrap unusable: %v", err)
	}
	prefix := fmt.Sprintf("gatebridge-%d-", os.Getpid())
	ours := func() []string { // our cgroup dirs, any hierarchy
		var dirs []string
		for _, base := range bases {
			m, _ := filepath.Glob(filepath.Join(base, prefix+"*"))
			dirs = append(dirs, m...)
		}
		return dirs
	}
	type seen struct {
		commandIn bool   // a process of the command was in the cgroup
		ownTask   string // a thread of ours found in it
	}
	result := make(chan seen, 1)
	stop := make(chan struct{})
	go func() {
		var s seen
		for {
			for _, dir := range ours() {
				data, _ := os.ReadFile(filepath.Join(dir, "tasks"))
				for _, tid := range strings.Fields(string(data)) {
					if _, err := os.Stat(fmt.Sprintf("/proc/%d/task/%s", os.Getpid(), tid)); err == nil {
						s.ownTask = dir + " holds thread " + tid + " of the test process"
					} else {
						s.commandIn = true
					}
				}
			}
			select {
			case <-stop:
				result <- s
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	res, err := b.Run(ctx, &Spec{
		Command: []string{"sleep", "1.5"},
		Limits:  Limits{Memory: 64 << 20, Pids: 64, CPUs: 1},
	})
	close(stop)
	s := <-result
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || res.Info["limits"] != "cgroup v1" {
		t.Fatalf("exit %d, info %v, stderr %q", res.ExitCode, res.Info, res.Stderr)
	}
	if !s.commandIn {
		t.Fatal("never saw the command in its cgroup: the check saw nothing")
	}
	if s.ownTask != "" {
		t.Error(s.ownTask)
	}
	if left := ours(); len(left) > 0 {
		t.Errorf("cgroups left after Run: %v", left)
	}
}
