package proc

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/gatebridge/gatebridge/sandbox"
)

// LookPath finds file in the absolute directories of pathList the way a
// shell would. A name containing a slash is returned as is.
func LookPath(file, pathList string) (string, bool) {
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

// NotFound is the Result of a command whose name is not in PATH: exit 127
// and a shell-like message on stderr (streamed and captured).
func NotFound(spec *sandbox.Spec, name string) *sandbox.Result {
	msg := []byte("gatebridge: " + name + ": command not found\n")
	if spec.Stderr != nil {
		spec.Stderr.Write(msg)
	}
	return &sandbox.Result{ExitCode: sandbox.ExitNotFound, Stdout: []byte{}, Stderr: msg}
}
