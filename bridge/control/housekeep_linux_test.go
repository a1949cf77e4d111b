package control

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Housekeeping runs at a lower priority than the rest of the server (and
// the client it answers): the thread running a job has nice +10 over
// this one.
func TestHousekeepRunsAtLowerPriority(t *testing.T) {
	nice := func(tid int) int {
		b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		n, err := strconv.Atoi(f[16]) // field 19 of stat: nice
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	runtime.LockOSThread() // this thread: one that is not housekeeping's
	defer runtime.UnlockOSThread()
	self := syscall.Gettid()
	var jobTID int
	housekeep(func() { jobTID = syscall.Gettid() })
	base := nice(self)
	if got, want := nice(jobTID), min(base+10, 19); got != want {
		t.Errorf("a housekeeping job ran at nice %d; want %d (the server's %d, +10)", got, want, base)
	}
	if jobTID == self {
		t.Error("the job ran on the caller's thread")
	}
}
