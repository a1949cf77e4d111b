package control

import (
	"fmt"

	"github.com/gatebridge/gatebridge/bridge/cmdpolicy"
)

// Config keys of the command limits, named in their errors.
const (
	MaxCommandBytesKey = "sandbox.max_command_bytes"
	MaxCommandsKey     = "sandbox.max_commands"
)

// DefaultMaxCommandBytes bounds a command's argv when
// Options.MaxCommandBytes is zero: Linux's limit for one argument
// (MAX_ARG_STRLEN, 32 pages), so a `sh -c` script over it could not
// start anyway, only with a worse error.
const DefaultMaxCommandBytes = 128 << 10

// CommandBytes is the size of argv as exec counts it: each word and its
// NUL.
func CommandBytes(argv []string) int64 {
	var n int64
	for _, a := range argv {
		n += int64(len(a)) + 1
	}
	return n
}

// CheckCommandSize refuses argv over max bytes (CommandBytes; max <= 0:
// no limit), naming MaxCommandBytesKey.
func CheckCommandSize(argv []string, max int64) error {
	if n := CommandBytes(argv); max > 0 && n > max {
		return &Error{Kind: KindInvalid, Field: "argv",
			Msg:  fmt.Sprintf("the command is %d bytes, over %s (%d)", n, MaxCommandBytesKey, max),
			Help: "write a long script to a file in the workspace and run that file, or raise " + MaxCommandBytesKey}
	}
	return nil
}

// checkCommand decides argv (as the sandbox would run it: a script is
// `/bin/sh -c SCRIPT`) with the environment the client adds (env:
// sandbox/open's and process/start's, KEY=VALUE) before anything starts:
// its size (Options.MaxCommandBytes), then the command policy
// (Options.Approvals.Commands; PATH or BASH_ENV in env is unknown). A
// command the policy marks ask is not refused but returned (ask), to be
// asked about before it starts (Process.Run: askStart, after Prepare's
// reply).
func (h *Host) checkCommand(argv, env []string) (ask *cmdpolicy.Result, err error) {
	if err := CheckCommandSize(argv, h.opts.MaxCommandBytes); err != nil {
		return nil, err
	}
	r := h.opts.Approvals.Commands.CheckArgvEnv(argv, env)
	switch r.Decision {
	case cmdpolicy.Allow:
		return nil, nil
	case cmdpolicy.Ask:
		return &r, nil
	}
	return nil, policyError(r, "")
}

// policyError is the refusal of r: a KindPolicy *Error wrapping the
// *cmdpolicy.DeniedError, whose Data a front end sends.
func policyError(r cmdpolicy.Result, help string) *Error {
	de := &cmdpolicy.DeniedError{Result: r}
	if help == "" {
		help = de.Hint()
	}
	return &Error{Kind: KindPolicy, Msg: de.Error(), Help: help, Err: de}
}

// countCommandLocked takes one of the sandbox's Options.MaxCommands (0: no
// limit); sb.mu is held.
func (sb *Sandbox) countCommandLocked() error {
	if max := sb.h.opts.MaxCommands; max > 0 && sb.commands >= max {
		return &Error{Kind: KindLimit,
			Msg:  fmt.Sprintf("sandbox %q has started %d commands, its limit (%s)", sb.id, sb.commands, MaxCommandsKey),
			Help: "open a new sandbox, or raise " + MaxCommandsKey + " (0: no limit)"}
	}
	sb.commands++
	return nil
}

// CommandLimitsText says the command limits in force, for a capability
// text ("" when only the default size applies, which no command a model
// writes by hand reaches).
func CommandLimitsText(maxCommandBytes int64, maxCommands int) string {
	var s string
	if maxCommandBytes > 0 && maxCommandBytes != DefaultMaxCommandBytes {
		s = fmt.Sprintf("A command line may be at most %d bytes (%s); write a longer script to a file first. ", maxCommandBytes, MaxCommandBytesKey)
	}
	if maxCommands > 0 {
		s += fmt.Sprintf("This sandbox starts at most %d commands (%s); later ones are refused. ", maxCommands, MaxCommandsKey)
	}
	return s
}
