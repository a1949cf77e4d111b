//go:build linux

package bwrap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"time"

	"github.com/gatebridge/gatebridge/sandbox"
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
	b := &Backend{}
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
	// This run's cgroup is the one holding `sleep 1.537`: other tests of
	// this process may start sandboxes with limits at the same time, and
	// their starting threads are briefly in their own cgroups.
	const marker = "1.537"
	isMarker := func(tid string) bool {
		b, _ := os.ReadFile("/proc/" + tid + "/cmdline")
		return string(b) == "sleep\x00"+marker+"\x00"
	}
	type seen struct {
		commandIn bool   // the command was seen in its cgroup
		name      string // that cgroup's name
		ownTask   string // a thread of ours found in it well after that
	}
	result := make(chan seen, 1)
	stop := make(chan struct{})
	go func() {
		var s seen
		var name string // this run's cgroup, once known
		var since time.Time
		for {
			for _, dir := range ours() {
				if name != "" && filepath.Base(dir) != name {
					continue
				}
				data, _ := os.ReadFile(filepath.Join(dir, "tasks"))
				for _, tid := range strings.Fields(string(data)) {
					if name == "" && isMarker(tid) {
						name, since, s.commandIn = filepath.Base(dir), time.Now(), true
					}
				}
				s.name = name
				if name == "" || time.Since(since) < 300*time.Millisecond {
					continue
				}
				// The command has run for a while: the thread that
				// started it has long left.
				for _, tid := range strings.Fields(string(data)) {
					if _, err := os.Stat(fmt.Sprintf("/proc/%d/task/%s", os.Getpid(), tid)); err == nil {
						s.ownTask = dir + " holds thread " + tid + " of the test process"
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
	res, err := b.Run(ctx, &sandbox.Spec{
		Command: []string{"sleep", marker},
		Limits:  sandbox.Limits{Memory: 64 << 20, Pids: 64, CPUs: 1},
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
	for _, base := range bases {
		if _, err := os.Lstat(filepath.Join(base, s.name)); err == nil {
			t.Errorf("%s left after Run", filepath.Join(base, s.name))
		}
	}
}

// Limits the cgroup refuses (a CPU quota below the kernel's 1 ms minimum)
// fail the run with a hint: the command never runs without the limits it
// was given. Before, it ran unlimited with only a note in Result.Info.
func TestLimitsRefusedNotDropped(t *testing.T) {
	if _, err := cgroupV1Bases(); err != nil {
		t.Skipf("no cgroup limits here: %v", err)
	}
	b := &Backend{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := b.Check(ctx); err != nil {
		if slices.Contains(strings.Split(os.Getenv("GATEBRIDGE_REQUIRE_BACKENDS"), ","), "bwrap") {
			t.Fatalf("bwrap required but unusable: %v", err)
		}
		t.Skipf("bwrap unusable: %v", err)
	}
	res, err := b.Run(ctx, &sandbox.Spec{Command: []string{"sh", "-c", "echo ran"}, Limits: sandbox.Limits{CPUs: 0.001, Pids: 64}})
	if err == nil {
		t.Fatalf("ran with cpus=0.001: exit %d, stdout %q, info %v", res.ExitCode, res.Stdout, res.Info)
	}
	var se *sandbox.Error
	if !errors.As(err, &se) || !strings.Contains(se.Help, "sandbox.limits") {
		t.Errorf("err %v, want a hint naming sandbox.limits", err)
	}
	t.Log(err, "; hint:", se.Help)
}
