// Package fspath holds path tests shared by the packages that decide
// where the sandbox may reach (gates, sandbox/docker, the CLI).
package fspath

import (
	"path/filepath"
	"strings"
)

// Within reports whether path p is dir or below it. Both must be clean and
// absolute, with symlinks already resolved by the caller where that
// matters; "/" holds every absolute path.
func Within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// Resolved is p with its symbolic links resolved, or p cleaned when they
// cannot be (p missing).
func Resolved(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

// UntrustedDir returns the directory of untrusted (Resolved) that holds
// one of paths, compared with it resolved and as written, or "" when
// none does. paths must be clean and absolute; "" entries of untrusted
// are skipped.
func UntrustedDir(untrusted []string, paths ...string) string {
	for _, u := range untrusted {
		if u == "" {
			continue
		}
		ru := Resolved(u)
		for _, p := range paths {
			if Within(p, ru) || Within(p, filepath.Clean(u)) {
				return ru
			}
		}
	}
	return ""
}
