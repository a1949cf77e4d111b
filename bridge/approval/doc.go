// Package approval decides whether a gate call may run: from the gate's
// approval setting, from the grants a person gave, and, when neither
// settles it, by asking someone through an [Approver]. It does not know
// its front end: the terminal prompt ([Terminal]) is one Approver, the
// JSON-RPC client (approval/request) and an MCP host (elicitation) are
// others, each a small adapter.
//
// # Decisions
//
// For each call, in this order ([Decider.Decide]):
//
//  1. a deny: the gate's setting is deny (approval: deny), or its argument
//     policy refuses the arguments (gates.ArgChecker): refused, whatever
//     any grant says, so a grant never widens the policy;
//  2. a grant that matches (gate, arguments, session, workspace, not
//     expired): allowed, the grant's id recorded;
//  3. the gate's setting: never runs it, ask asks the Approver; no
//     Approver, or one that does not answer within [Config.Timeout],
//     denies.
//
// # Grants
//
// A [Grant] names a gate and a scope (exact arguments, one anchored RE2
// pattern per argument, or any arguments the gate's policy allows), a
// [Lifetime] and an optional expiry. Grants for a session live in the
// Decider; those for a workspace or always live in a [Store], a YAML
// file only its owner can read and write, reread whenever it changes.
//
// # Bounds
//
// Each session has at most [Config.MaxPending] calls waiting for an
// answer (more are denied at once), each waits at most [Config.Timeout],
// and a call whose context ends withdraws its question.
//
// # Records
//
// Every decision is a [Record] handed to [Config.Record] (the audit log):
// who decided (a person, a grant, the runtime, the config, a timeout),
// the scope, the time.
package approval
