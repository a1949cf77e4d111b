// Package bridge runs the host side of the gatebridge mailbox: it creates a
// session directory, notices the calls a sandboxed command publishes in it,
// dispatches each to its gate, and writes the answers back.
//
// # Sessions
//
// [Open] creates <Config.Dir>/gb-XXXX/ with bin/ (one wrapper per gate, see
// package wrappers), calls/ (written by the sandbox), responses/ (written by
// the host) and tmp/ (the command's TMPDIR). [Session.Run] runs a command in
// a [sandbox.Backend] with the session mounted and returns a [Result] that
// lists every call; [Session.Close] waits for calls in flight and removes the
// directory. [Run] does all three.
//
// # Noticing calls
//
// One fsnotify watcher per process serves every session. It watches calls/
// and, for a new call directory, the directory itself (watch, then look
// again, so a ready marker written in between is not missed). Events can be
// lost (queue overflow, NFS, FUSE, Docker Desktop), so each session also
// rescans calls/ on overflow, on watcher errors and every
// Config.RescanInterval; [WatchPoll] scans every Config.PollInterval
// instead. Each call id is claimed once, in memory, so events and scans may
// overlap freely.
//
// # Hostile input
//
// Everything under calls/ is written by the sandbox and treated as hostile.
// Files are opened relative to directory descriptors, one path component at
// a time, with O_NOFOLLOW|O_NONBLOCK; only regular files with one link are
// read, each read is capped, and ids and gate names are validated before
// they are used. Responses are written as a temp file created with O_EXCL,
// then renamed; the exit code last. [Limits] bound what one session
// accepts; a refusal names the config key that sets the limit.
//
// # Protocol
//
// The mailbox layout (v1) is documented in docs/protocol.md. A client that
// knows only v1 — args/N, gate, stdin, ready; polls for responses/ID.exit —
// is answered; the wake FIFO and the .text marker are optional extensions.
package bridge
