//go:build !linux

package main

import "runtime"

func fsCheck(check, dir string) checkResult {
	return checkResult{Check: check + " filesystem", Status: statusWarn,
		Detail: "filesystem type of " + dir + " not checked on " + runtime.GOOS + "; the rescan covers lost events"}
}

func wakeCheck(dir string) checkResult {
	return checkResult{Check: "wake", Status: statusWarn,
		Detail: "FIFO wake-ups not checked on " + runtime.GOOS + "; wrappers fall back to polling where FIFOs fail"}
}
