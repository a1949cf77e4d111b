// Package hostilefs does file I/O on the host in directory trees that a
// sandbox can write at the same time.
//
// A check on a path string is not a check on the object used: between a
// check and an open by name, the sandbox can swap a directory for a
// symlink (renameat2 RENAME_EXCHANGE makes the swap atomic), and every
// API that resolves the string again ([os.Root] included, which follows
// links that stay inside the root) then reaches whatever the link names.
// So this package never resolves a path twice: [Dir.Walk] opens one
// component at a time from an open directory with
// O_NOFOLLOW|O_DIRECTORY, calling the caller's check on each component
// before it is opened, and every later operation is relative to the
// directory fd the walk returned. The names checked are then the names of
// the objects opened, whatever the sandbox renames afterwards: it can move
// an opened directory, but the host keeps writing into that directory, not
// into whatever now has its name.
//
// # Entry by entry
//
// The mailbox server (package bridge), the command agent's host side and
// the gates read directories the sandbox writes one entry at a time,
// relative to directory fds: [OpenDirAt], [ReadFileAt], [OpenFileAt],
// [ListDir] and [CheckRegularAt] follow no link and read only regular
// files with one link, capped, refusing the rest with a [*FileError]
// ([Refused]); [WriteFileAt] writes atomically (an O_EXCL temp file
// renamed over the name); [MkdirOpenAt] makes a directory and goes on from
// its fd; [MkfifoAt], [MkfifoForOwnerAt], [WakeAt] and [HasReader] are the
// wake FIFO's helpers (never blocking); [RemoveTree] and [RemoveAllAt]
// remove a tree the sandbox may still be writing, at any depth, within a
// bound of entries and time.
//
// # Ownership
//
// A host process running as root creates files and directories as root.
// [WalkOptions.Owner] and [WriteOptions.Owner] give what it creates to
// another owner (fchown on the new object's fd), so a root host leaves no
// root-owned entries in a user's tree.
//
// # Platforms
//
// The implementation needs openat, mkdirat, renameat and O_NOFOLLOW: it is
// built for Unix. Elsewhere the walk fails with an error wrapping
// [errors.ErrUnsupported], and the entry-by-entry functions are not built.
//
// One package holds the rules for every directory the sandbox writes.
package hostilefs

import (
	"errors"
	"io/fs"
	"time"
)

// Errors for entries a walk refuses, returned inside an [*fs.PathError]
// that names the entry (relative to the directory walked from); the
// entry-by-entry functions return the first two inside a [*FileError].
var (
	ErrSymlink = errors.New("is a symbolic link")
	ErrNotDir  = errors.New("is not a directory")
	// ErrChanged: the entry was not a directory when opened but is one
	// now, so something swapped it during the walk.
	ErrChanged = errors.New("changed while it was opened")
	// ErrBadPath: the path is not clean and relative ("", "/x", "a/../b",
	// "a//b"); a walk never goes up.
	ErrBadPath = errors.New("is not a clean relative path")
)

// Info is what lstat tells about one entry.
type Info struct {
	Mode     fs.FileMode
	UID, GID int
	Nlink    uint64
	Size     int64
	Dev, Ino uint64
}

// Owner is the owner given to a new file or directory. A GID of -1, or a
// parent directory with the setgid bit (whose group the kernel already
// gave the new entry), keeps the group the entry was created with.
type Owner struct {
	UID, GID int
}

// WalkOptions configures [Dir.Walk].
type WalkOptions struct {
	// Check, if set, is called with each component's path (relative to
	// the directory walked from, "a", then "a/b", …) before that
	// component is opened or made. An error stops the walk and is
	// returned as is.
	Check func(rel string) error
	// Create makes missing directories with mode Perm: less the umask,
	// unless ExactPerm (then only a directory the walk made, as for
	// Owner, gets exactly Perm).
	Create    bool
	Perm      fs.FileMode
	ExactPerm bool
	// Owner, if set, is given to the directories the walk makes (only to
	// a directory that, once opened, belongs to this process's uid and is
	// empty: if the sandbox renames another directory over it between
	// mkdir and open, that one keeps its owner).
	Owner *Owner
}

// WriteOptions configures [Dir.WriteFileAtomic].
type WriteOptions struct {
	// Perm is the new file's mode: less the umask, unless ExactPerm.
	Perm      fs.FileMode
	ExactPerm bool
	// Owner, if set, owns the new file.
	Owner *Owner
	// Sync flushes the data to disk before the rename.
	Sync bool
}

// DirEntry is one entry of [Dir.ReadDir].
type DirEntry struct {
	Name    string
	Info    Info
	ModTime time.Time
}
