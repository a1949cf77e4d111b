//go:build !unix

package approval

import "errors"

var errUnsupported = errors.New("approval: the grants file is not supported on this platform")

func statFile(string) (stamp, error)   { return stamp{}, errUnsupported }
func readFile(string) ([]Grant, error) { return nil, errUnsupported }
func ensureDir(string) error           { return errUnsupported }
func lockDir(string) (func(), error)   { return nil, errUnsupported }
func writeAtomic(string, []byte) error { return errUnsupported }
