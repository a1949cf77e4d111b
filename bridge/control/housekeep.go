package control

import (
	"runtime"
	"sync"
	"time"
)

// Housekeeping (opening a sandbox's spare session, removing a finished
// process's session) runs on a few OS threads of lower priority (nice
// +10, Linux). None of it has to be quick, and at normal priority it
// delays what has to be: on a small machine the kernel often wakes the
// client that was just sent a process's exit on the CPU where this
// process goes on to remove that process's session, and the client then
// waits for the removal (a quarter of a millisecond per command, measured
// on 2 CPUs). At lower priority it gives way at once and still runs
// whenever a CPU has nothing better to do.
//
// A job must be short: the threads are few and shared by every sandbox of
// the server, so one sandbox whose jobs run long would hold up the
// others'. A session's removal there gives up after housekeepRemoveTime
// (a session something still writes in, which a persistent sandbox can
// do for as long as it likes, would take its full time bound, 30 s) and
// leaves the rest to the prune of a later session open.
var housekeeper struct {
	once sync.Once
	jobs chan func()
}

// housekeepRemoveTime bounds a session's removal on a housekeeping thread
// (a session's directory goes in a few milliseconds on a tmpfs).
const housekeepRemoveTime = 500 * time.Millisecond

// housekeep runs fn on a housekeeping thread and returns when it is done.
// fn must not call housekeep.
func housekeep(fn func()) {
	housekeeper.once.Do(func() {
		housekeeper.jobs = make(chan func())
		for range max(2, runtime.GOMAXPROCS(0)) {
			go housekeepThread()
		}
	})
	done := make(chan struct{})
	housekeeper.jobs <- func() {
		defer close(done)
		fn()
	}
	<-done
}

func housekeepThread() {
	// Never unlocked: the thread keeps its lower priority, and no other
	// goroutine ever runs on it.
	runtime.LockOSThread()
	lowerThreadPriority()
	for job := range housekeeper.jobs {
		job()
	}
}
