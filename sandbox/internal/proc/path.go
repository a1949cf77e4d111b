package sandbox

import (
	"os"
	"path/filepath"
	"strings"
)

// EnvValue returns the value of key in a KEY=VALUE list (the last one
// wins).
func EnvValue(env []string, key string) (string, bool) {
	val, found := "", false
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			val, found = v, true
		}
	}
	return val, found
}

// lookPath finds file in the absolute directories of pathList the way a
// shell would. A name containing a slash is returned as is.
func lookPath(file, pathList string) (string, bool) {
	if strings.Contains(file, "/") {
		return file, true
	}
	if file == "" {
		return "", false
	}
	for _, dir := range filepath.SplitList(pathList) {
		if !filepath.IsAbs(dir) {
			continue // never search the cwd through an empty or relative entry
		}
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

// notFound is the Result of a command whose name is not in PATH: exit 127
// and a shell-like message on stderr (streamed and captured).
func notFound(spec *Spec, name string) *Result {
	msg := []byte("gatebridge: " + name + ": command not found\n")
	if spec.Stderr != nil {
		spec.Stderr.Write(msg)
	}
	return &Result{ExitCode: ExitNotFound, Stdout: []byte{}, Stderr: msg}
}
