package proc

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ReaperPID returns the running reaper's pid, or 0.
func ReaperPID() int {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	if reaper.running == nil {
		return 0
	}
	return reaper.running.Process.Pid
}

// ReaperList returns the group ids the reaper's list holds now; an error
// when the list is not whole fixed-width lines of group ids.
func ReaperList() ([]int, error) {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	if reaper.list == nil {
		return nil, nil
	}
	b, err := io.ReadAll(io.NewSectionReader(reaper.list, 0, 1<<20))
	if err != nil {
		return nil, err
	}
	if len(b)%reaperSlot != 0 {
		return nil, fmt.Errorf("list of %d bytes is not whole %d-byte lines: %q", len(b), reaperSlot, b)
	}
	var ids []int
	for line := range bytes.Lines(b) {
		if f := strings.TrimSpace(string(line)); f != "" {
			id, err := strconv.Atoi(f)
			if err != nil {
				return nil, fmt.Errorf("list line %q", line)
			}
			ids = append(ids, id)
		}
	}
	return ids, nil
}
