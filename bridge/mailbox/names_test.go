package mailbox

import (
	"strings"
	"testing"
)

func TestValidateName(t *testing.T) {
	good := []string{"read_file", "gb_echo", "x", "git-log", "a.b", "c++", "X9", "search"}
	for _, n := range good {
		if err := ValidateName(n); err != nil {
			t.Errorf("ValidateName(%q) = %v, want nil", n, err)
		}
	}
	bad := map[string]string{
		"":                      "empty",
		"done":                  "keyword",
		"if":                    "keyword",
		"echo":                  "builtin",
		"cd":                    "builtin",
		"read":                  "builtin",
		"test":                  "builtin",
		"printf":                "builtin",
		"[":                     "letters",
		"cat":                   "wrapper itself",
		"ls":                    "busybox",
		"a/b":                   "letters",
		"../x":                  "letters",
		"-x":                    "letters",
		".hidden":               "letters",
		"a b":                   "letters",
		"x=1":                   "letters",
		"é":                     "letters",
		"a\nb":                  "letters",
		strings.Repeat("a", 65): "longer than",
	}
	for n, why := range bad {
		err := ValidateName(n)
		if err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("ValidateName(%q) = %v, want error mentioning %q", n, err, why)
		}
	}
}
