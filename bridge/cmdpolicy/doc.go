// Package cmdpolicy decides, before anything starts, whether a command
// or a shell script may run in a sandbox: allow, deny, or ask a person
// (issue 29, policy.commands in the config; docs/approvals.md "Command
// policy").
//
// A script is parsed (mvdan.cc/sh/v3/syntax) and every simple command in
// it is checked: in pipes, lists, subshells, command and process
// substitutions, function bodies, compound commands, redirections and
// assignments. Wrappers with a static target (env, timeout, xargs, sudo,
// sh -c '...', eval '...') are followed to the command they run; what
// cannot be known statically (a name that is an expansion, a script
// file, sh -c "$x") gets the unknown decision. The most restrictive
// decision over the script wins.
//
// The package is transport-neutral: run, sandbox exec, serve's
// process/start, the MCP bash tool and the gate dispatcher call
// [Policy.CheckArgv], [Policy.CheckScript] and [Policy.CheckGate].
//
// This is guidance and approval, not isolation: a shell is a language
// that can compute any command at run time, and a program the policy
// allows (python, make, git with an alias) can run others. The sandbox
// stays the boundary.
package cmdpolicy
