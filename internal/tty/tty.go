// Package tty says whether an output is a terminal, to print what only a
// person watching needs (`gatebridge run` names the backend auto picked).
package tty

import (
	"io"
	"os"
)

// IsTerminal reports whether w is an *os.File open on a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && f != nil && isTerminal(f)
}
