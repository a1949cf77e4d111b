package bwrap

import "time"

// DelayStatus makes every bwrap run read its status report d late, as a
// loaded host may; the returned function undoes it.
func DelayStatus(d time.Duration) (undo func()) {
	bwrapStatusDelay.Store(int64(d))
	return func() { bwrapStatusDelay.Store(0) }
}

// BeforeStart runs f between the checks of a bwrap run's protected paths
// and bwrap's start; the returned function undoes it.
func BeforeStart(f func(workspace string)) (undo func()) {
	bwrapTestHookBeforeStart = f
	return func() { bwrapTestHookBeforeStart = nil }
}
