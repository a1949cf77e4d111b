package mailbox

// DirsEnv returns the environment entries that name a session's
// directories as the sandboxed command sees them (l holds the paths
// inside): EnvCallsDir, EnvResponsesDir and EnvSessionDir, in that order.
// Entries for empty paths are left out. A backend adds PATH (bin/ first)
// and TMPDIR itself.
func DirsEnv(l Layout) []string {
	var env []string
	for _, e := range []struct{ key, val string }{
		{EnvCallsDir, l.Calls}, {EnvResponsesDir, l.Responses}, {EnvSessionDir, l.Root},
	} {
		if e.val != "" {
			env = append(env, e.key+"="+e.val)
		}
	}
	return env
}
