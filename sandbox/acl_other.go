//go:build !linux

package sandbox

import "errors"

var errNoACL = errors.New("POSIX ACLs are only set on Linux")

func grantACL(d SessionDirs, uid int) error { return errNoACL }
