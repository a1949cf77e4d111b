//go:build !unix

package gates

import "io/fs"

// Open flags: platforms without O_NONBLOCK rely on the Stat check before
// opening and on the fstat check after.
const (
	oNonblock  = 0
	oDirectory = 0
)

// fileID cannot tell here (write_file is Unix-only: see hostilefs).
func fileID(fs.FileInfo) (dev, ino uint64, ok bool) { return 0, 0, false }

// fileOwner cannot tell here.
func fileOwner(fs.FileInfo) (uid, gid int, ok bool) { return 0, 0, false }
