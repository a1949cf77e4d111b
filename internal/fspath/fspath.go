// Package fspath holds path tests shared by the packages that decide
// where the sandbox may reach (gates, sandbox/docker, the CLI).
package fspath

import "strings"

// Within reports whether path p is dir or below it. Both must be clean and
// absolute, with symlinks already resolved by the caller where that
// matters; "/" holds every absolute path.
func Within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
