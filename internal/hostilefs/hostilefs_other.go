//go:build !unix

package hostilefs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"
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
func (d *Dir) WriteAtomicFrom(string, io.Reader, int64, WriteOptions) (int64, error) {
	return 0, errUnsupported
}
func (d *Dir) OpenFile(string) (*os.File, Info, error)                { return nil, Info{}, errUnsupported }
func (d *Dir) OpenWrite(string, bool, WriteOptions) (*os.File, error) { return nil, errUnsupported }
func (d *Dir) Mkdir(string, WalkOptions) error                        { return errUnsupported }
func (d *Dir) Remove(string, bool) error                              { return errUnsupported }
func (d *Dir) Rename(string, *Dir, string, bool) error                { return errUnsupported }
func (d *Dir) ReadDir(int) ([]DirEntry, bool, error)                  { return nil, false, errUnsupported }
func (d *Dir) LstatTime(string) (Info, time.Time, error)              { return Info{}, time.Time{}, errUnsupported }
func (d *Dir) ReplaceFrom(string, io.Reader, int64, WriteOptions) (int64, error) {
	return 0, errUnsupported
}

// PathSteps fails: see the package doc.
func PathSteps(string) ([]PathStep, string, error) { return nil, "", errUnsupported }
