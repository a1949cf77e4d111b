package sandbox

import (
	"strings"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
)

// SessionEnv returns the environment entries that point the wrappers at the
// session as mounted inside the sandbox (inside are the in-sandbox paths),
// with inside.Bin prepended to basePath. Entries for empty paths are left
// out, and PATH never gets an empty element (which would search the cwd).
func SessionEnv(inside SessionDirs, basePath string) []string {
	var path []string
	for _, p := range []string{inside.Bin, basePath} {
		if p != "" {
			path = append(path, p)
		}
	}
	var env []string
	add := func(key, val string) {
		if val != "" {
			env = append(env, key+"="+val)
		}
	}
	add("PATH", strings.Join(path, ":"))
	add("TMPDIR", inside.Tmp)
	add(mailbox.EnvCallsDir, inside.Calls)
	add(mailbox.EnvResponsesDir, inside.Responses)
	add(mailbox.EnvSessionDir, inside.Root)
	return env
}

// MergeEnv returns base with the entries of over added, later keys
// replacing earlier ones (a KEY=VALUE list with unique keys, order kept).
func MergeEnv(base []string, over ...[]string) []string {
	idx := map[string]int{}
	var out []string
	add := func(kv string) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			return
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	for _, kv := range base {
		add(kv)
	}
	for _, list := range over {
		for _, kv := range list {
			add(kv)
		}
	}
	return out
}
