package main

import "testing"

func TestSandboxCpArgs(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		ok         bool
		name, path string
		in         bool
	}{
		{[]string{"a.txt", "work:docs/"}, true, "work", "docs/", true},
		{[]string{"work:out/r.json", "./r:json"}, true, "work", "out/r.json", false},
		{[]string{"work:a", "other:b"}, false, "", "", false},
		{[]string{"a", "b"}, false, "", "", false},
		{[]string{"/abs:x", "b"}, false, "", "", false},
		{[]string{"work:", "b"}, false, "", "", false},
		{[]string{"a"}, false, "", "", false},
	} {
		err := cpArgs(nil, tc.args)
		if (err == nil) != tc.ok {
			t.Errorf("%q: error %v, want ok %v", tc.args, err, tc.ok)
			continue
		}
		if !tc.ok {
			continue
		}
		if name, path, in := cpSides(tc.args); name != tc.name || path != tc.path || in != tc.in {
			t.Errorf("%q: %q %q %v, want %q %q %v", tc.args, name, path, in, tc.name, tc.path, tc.in)
		}
	}
}
