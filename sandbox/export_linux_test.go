package sandbox

// ReaperPID returns the running reaper's pid, or 0.
func ReaperPID() int {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	return reaper.pid
}
