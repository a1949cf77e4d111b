//go:build !linux

package sandbox

import "os"

// pinPaths opens nothing outside Linux (see protect_linux.go): no
// backend that mounts pinned paths runs there.
func pinPaths(string, []string, []bool) ([]*os.File, error) { return nil, nil }
