//go:build !linux && !darwin

package tty

import "os"

// isTerminal is false where gatebridge does not know how to ask.
func isTerminal(*os.File) bool { return false }
