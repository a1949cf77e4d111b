package sandbox

import (
	"strings"
)

// SessionEnv returns the environment entries that point spec's command at
// its session as mounted inside the sandbox (inside are the in-sandbox
// paths): spec.SessionEnv's, or when that is nil [PathEnv]'s. Backends add
// them after [Spec.Env].
func SessionEnv(spec *Spec, inside SessionDirs, basePath string) []string {
	if spec.SessionEnv != nil {
		return spec.SessionEnv(inside, basePath)
	}
	return PathEnv(inside, basePath)
}

// PathEnv returns PATH, with inside.Bin prepended to basePath, and TMPDIR
// (inside.Tmp). Entries for empty paths are left out, and PATH never gets
// an empty element (which would search the cwd).
func PathEnv(inside SessionDirs, basePath string) []string {
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

// EnvValue returns the value of key in a KEY=VALUE list (the last one
// wins).
func EnvValue(env []string, key string) (string, bool) {
	val, found := "", false
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			val, found = v, true
		}
	}
	return val, found
}
