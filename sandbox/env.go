package sandbox

import "strings"

// Environment variables a session gives the sandboxed command.
const (
	EnvCallsDir     = "GATEBRIDGE_CALLS_DIR"
	EnvResponsesDir = "GATEBRIDGE_RESPONSES_DIR"
	EnvSessionDir   = "GATEBRIDGE_SESSION_DIR"
)

// SessionEnv returns the environment entries that point the wrappers at the
// session as mounted inside the sandbox (inside are the in-sandbox paths),
// with inside.Bin prepended to basePath.
func SessionEnv(inside SessionDirs, basePath string) []string {
	path := inside.Bin
	if basePath != "" {
		path += ":" + basePath
	}
	return []string{
		"PATH=" + path,
		"TMPDIR=" + inside.Tmp,
		EnvCallsDir + "=" + inside.Calls,
		EnvResponsesDir + "=" + inside.Responses,
		EnvSessionDir + "=" + inside.Root,
	}
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
