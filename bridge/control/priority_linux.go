package control

import "syscall"

// lowerThreadPriority gives the calling thread (not the whole process)
// nice +10 more; best effort.
func lowerThreadPriority() {
	tid := syscall.Gettid()
	prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
	if err != nil {
		return
	}
	// The raw getpriority value is 20-nice.
	nice := 20 - prio
	syscall.Setpriority(syscall.PRIO_PROCESS, tid, min(nice+10, 19))
}
