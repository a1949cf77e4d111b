// Package bridge runs the host side of gatebridge: a transport-neutral
// [Dispatcher] that calls gates, the mailbox server that feeds it the calls
// a sandboxed command publishes, and the [Session] that ties both to one
// session directory.
//
// # Dispatcher
//
// [Dispatcher.Dispatch] takes a [Request] (gate name, arguments, stdin, and
// the writers its output goes to) and returns a [Response]. It owns
// everything that does not depend on how the call arrived: gate lookup,
// the approval hook ([Config.Approve]), the per-call timeout, recovering a
// gate's panic, output caps, the [CallRecord] and the audit log, and the
// per-session results gates set (submit's answer). The mailbox server is
// one front end; other transports (the JSON-RPC protocol, MCP) call
// Dispatch the same way. A Request's Stdout and Stderr receive output as
// the gate writes it, so a transport that can stream does.
//
// # Sessions
//
// [Open] creates a session directory (layout: package mailbox) with one
// wrapper per gate in bin/ (package wrappers; gates registered later get
// theirs when they are registered), and starts its mailbox server.
// [Session.Run] runs a command in a [sandbox.Backend] with the session
// mounted and returns a [Result] that lists every call; [Session.Close]
// waits for calls in flight and removes the directory. [Run] does all three.
//
// # Noticing calls
//
// One fsnotify watcher per process serves every session. It watches calls/
// and, for a new call directory, the directory itself (watch, then look
// again, so a ready marker written in between is not missed). On Linux the
// call directory is watched through /proc/self/fd/N of the descriptor the
// host opened, so a symlink swapped in cannot redirect the watch; on kqueue
// systems (macOS, BSD) it is watched by path after checking it is still
// that directory. kqueue holds one descriptor per watched directory and per
// entry of it, so there a command that floods calls/ with entries makes
// the host open one descriptor each, which Limits do not bound (on Linux
// they bound the watched call directories); macOS is vetted in CI but not
// tested. Events can be lost (queue overflow, NFS, FUSE, Docker
// Desktop), so each session also rescans calls/ on overflow, on watcher
// errors and every Config.RescanInterval; [WatchPoll] scans every
// Config.PollInterval instead. Each call id is claimed once, in memory, so
// events and scans may overlap freely.
//
// # Cancellation
//
// A call's context is cancelled when the session's run ends, when its
// timeout passes, and when its caller goes away: a waiting wrapper holds
// its wake FIFO open, and the server checks every 100 ms that someone
// still does. A cancelled call gets no answer and is recorded as
// [DecisionCanceled].
//
// # Hostile input
//
// Everything under calls/ is written by the sandbox and read by the
// mailbox server (callfile.go) through internal/hostilefs: fd-relative,
// without following links, only regular files with one link, every read
// capped, in the encodings of package mailbox. A session's directories
// are made relative to their parent's descriptor and reached through
// descriptors from then on (sessiondir.go). [Limits] bound what one
// session accepts (calls, arguments, stdin, output, unread response
// bytes); a refusal names the limit, or the setting [Config].LimitKey
// names for it.
package bridge
