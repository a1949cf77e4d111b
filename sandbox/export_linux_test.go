package sandbox

// ReaperPID returns the running reaper's pid, or 0.
func ReaperPID() int {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	if reaper.running == nil {
		return 0
	}
	return reaper.running.Process.Pid
}
