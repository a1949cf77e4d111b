//go:build !unix

package hostilefs

import (
	"errors"
	"fmt"
)

var errUnsupported = fmt.Errorf("hostilefs: no-follow walks need openat and O_NOFOLLOW (Unix): %w", errors.ErrUnsupported)

// Dir is an open directory; on this platform none can be opened.
type Dir struct{}

// OpenDir fails: see the package doc.
func OpenDir(path string) (*Dir, error) { return nil, errUnsupported }

func (d *Dir) Fd() int                                            { return -1 }
func (d *Dir) Close() error                                       { return nil }
func (d *Dir) Stat() (Info, error)                                { return Info{}, errUnsupported }
func (d *Dir) Lstat(name string) (Info, error)                    { return Info{}, errUnsupported }
func (d *Dir) Walk(rel string, o WalkOptions) (*Dir, error)       { return nil, errUnsupported }
func (d *Dir) WriteFileAtomic(string, []byte, WriteOptions) error { return errUnsupported }
