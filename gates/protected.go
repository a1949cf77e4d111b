package gates

import (
	"path/filepath"
	"strings"
)

// ProtectedPath reports the entry of protected that rel (clean, relative)
// is or lies under. An entry of one component (".git") is protected
// wherever it appears, so "sub/.git/hooks/x" (a nested repository the host
// may run git in) is refused too; a longer entry ("config/keys") is
// matched from the root. The comparison ignores case: on a
// case-insensitive filesystem .GIT/config is .git/config.
//
// The file gates and the control plane's file API (bridge/control) both
// refuse what it matches.
func ProtectedPath(rel string, protected []string) (string, bool) {
	rel = filepath.ToSlash(rel)
	parts := strings.Split(rel, "/")
	for _, p := range protected {
		p = strings.Trim(filepath.ToSlash(filepath.Clean(p)), "/")
		if p == "." || p == "" {
			continue
		}
		if !strings.Contains(p, "/") {
			for _, c := range parts {
				if strings.EqualFold(c, p) {
					return p, true
				}
			}
			continue
		}
		if strings.EqualFold(rel, p) || (len(rel) > len(p) && strings.EqualFold(rel[:len(p)], p) && rel[len(p)] == '/') {
			return p, true
		}
	}
	return "", false
}

// ProtectedBelow reports the entry of protected of more than one
// component ("tools/hooks") that lies strictly under rel (clean,
// relative; "tools"), ignoring case as [ProtectedPath] does. Renaming a
// directory onto rel would plant the entry's content; renaming rel away
// would move it. (A one-component entry, ".git", is matched wherever it
// appears, so it moves with its parent and stays protected.)
func ProtectedBelow(rel string, protected []string) (string, bool) {
	rel = filepath.ToSlash(rel)
	for _, p := range protected {
		p = strings.Trim(filepath.ToSlash(filepath.Clean(p)), "/")
		if !strings.Contains(p, "/") {
			continue
		}
		if rel == "." || (len(p) > len(rel) && strings.EqualFold(p[:len(rel)], rel) && p[len(rel)] == '/') {
			return p, true
		}
	}
	return "", false
}
