//go:build !linux

package doctor

import "runtime"

func fsCheck(check, dir string) Finding {
	return Finding{Check: check + " filesystem", Status: statusWarn,
		Detail: "filesystem type of " + dir + " not checked on " + runtime.GOOS + "; the rescan covers lost events"}
}

func wakeCheck(dir string) Finding {
	return Finding{Check: "wake", Status: statusWarn,
		Detail: "FIFO wake-ups not checked on " + runtime.GOOS + "; wrappers fall back to polling where FIFOs fail"}
}
