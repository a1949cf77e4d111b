package gates

import (
	"context"
	"os/exec"
)

// An Isolator runs a gate's host program in a sandbox of its own, with no
// more authority than an [IsolateSpec] gives it. A kind whose gates run a
// program (command gates, stdio MCP servers) builds the [exec.Cmd] as it
// would for the host and hands it to Isolate before starting it. A
// program wires one into [Env.Isolator]; package gates has none (it does
// not import package sandbox).
//
// Isolate rewrites cmd, which must not have been started, so that
// starting it starts cmd's program (Path, Args, Env, Dir) inside the
// isolated sandbox. Stdin, Stdout and Stderr keep working, and so does the
// caller's way of stopping the program (killing the process or its process
// group, exec.CommandContext's Cancel): once the process the caller
// started is gone, so is every process the program started. The program
// never runs as root, sees the system directories a program needs
// read-only, its own program file and Dir read-only, a private /tmp, and
// nothing else of the host but what the spec lists.
//
// ctx bounds Isolate's own work (a probe, a cgroup), not the program's
// life. An error means cmd must not run at all: neither isolated nor on
// the host (fail closed). When err is nil, cleanup releases what Isolate
// made; call it once, after cmd has been waited for or if it never
// started. An Isolator is safe for concurrent use.
type Isolator interface {
	Isolate(ctx context.Context, cmd *exec.Cmd, s IsolateSpec) (cleanup func(), err error)
}

// IsolateSpec is what an isolated program may reach beyond what every one
// gets (see [Isolator]).
type IsolateSpec struct {
	Read    []string // host paths it may read
	Write   []string // host paths it may read and write
	Network bool     // the host's network; without it, none
}
