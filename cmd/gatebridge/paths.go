package main

import "strings"

// within reports whether path p is dir or below it (both clean and
// absolute, symlinks already resolved by the caller where it matters).
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
