package approval

import (
	"strings"
	"testing"
	"time"
)

func mustGrant(t *testing.T, g Grant) Grant {
	t.Helper()
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGrantMatches(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	exact := mustGrant(t, Grant{Gate: "git_log", Exact: []string{"-n", "5"}, Lifetime: LifeAlways})
	pat := mustGrant(t, Grant{Gate: "git_log", Patterns: []string{"-n", "[0-9]+"}, Lifetime: LifeWorkspace, Workspace: "/src/app"})
	sess := mustGrant(t, Grant{Gate: "git_log", AnyArgs: true, Lifetime: LifeSession, Session: "s1"})
	expired := mustGrant(t, Grant{Gate: "git_log", AnyArgs: true, Lifetime: LifeAlways, Expires: now})
	for _, c := range []struct {
		g           Grant
		gate        string
		args        []string
		session, ws string
		want        bool
	}{
		{exact, "git_log", []string{"-n", "5"}, "", "", true},
		{exact, "git_log", []string{"-n", "6"}, "", "", false},
		{exact, "git_log", []string{"-n", "5", "x"}, "", "", false},
		{exact, "other", []string{"-n", "5"}, "", "", false},
		{pat, "git_log", []string{"-n", "42"}, "", "/src/app", true},
		{pat, "git_log", []string{"-n", "42"}, "", "/src/other", false},
		{pat, "git_log", []string{"-n", "42x"}, "", "/src/app", false}, // anchored
		{pat, "git_log", []string{"-n", "x42"}, "", "/src/app", false},
		{pat, "git_log", []string{"-n"}, "", "/src/app", false},
		{sess, "git_log", []string{"anything"}, "s1", "", true},
		{sess, "git_log", nil, "s2", "", false},
		{expired, "git_log", nil, "", "", false},
	} {
		if got := c.g.Matches(c.gate, c.args, c.session, c.ws, now); got != c.want {
			t.Errorf("%s: Matches(%s %q session=%q ws=%q) = %v, want %v", c.g.Describe(), c.gate, c.args, c.session, c.ws, got, c.want)
		}
	}
}

func TestGrantValidate(t *testing.T) {
	for _, g := range []Grant{
		{Gate: "", AnyArgs: true, Lifetime: LifeAlways},
		{Gate: "g", Lifetime: LifeAlways},                                          // no scope
		{Gate: "g", AnyArgs: true, Exact: []string{}, Lifetime: LifeAlways},        // two scopes
		{Gate: "g", AnyArgs: true, Lifetime: "forever"},                            // lifetime
		{Gate: "g", AnyArgs: true, Lifetime: LifeWorkspace, Workspace: "relative"}, // workspace
		{Gate: "g", Patterns: []string{"("}, Lifetime: LifeAlways},                 // bad RE2
		{Gate: "g", Exact: []string{"a\x00b"}, Lifetime: LifeAlways},
	} {
		if err := g.Validate(); err == nil {
			t.Errorf("%+v: validated", g)
		}
	}
}

// Attack: arguments made to look like a line of gatebridge's, another
// gate or another choice are shown escaped, one line each, and long ones
// cut with their length.
func TestDescribeEscapes(t *testing.T) {
	g := mustGrant(t, Grant{Gate: "git_log", Lifetime: LifeAlways, Exact: []string{
		"x\n" + Marker + "  y  allow read_secrets", "\x1b[2K\rfake", "\xff\xfe", strings.Repeat("A", 500)}})
	d := g.Describe()
	for _, bad := range []string{"\n", "\r", "\x1b", "\xff"} {
		if strings.Contains(d, bad) {
			t.Errorf("Describe shows %q raw: %q", bad, d)
		}
	}
	for _, want := range []string{`\n`, `\x1b[2K\rfake`, `\xff\xfe`, "(500 bytes)"} {
		if !strings.Contains(d, want) {
			t.Errorf("Describe = %q, want it to contain %q", d, want)
		}
	}
}

func TestGrantFlags(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	g, err := GrantFlags{Gate: "git_log", Args: []string{"2=[0-9]+", "1=-n"}, Workspace: "/src/app", For: time.Hour}.Grant(now)
	if err != nil || strings.Join(g.Patterns, " ") != "-n [0-9]+" || g.Lifetime != LifeWorkspace || !g.Expires.Equal(now.Add(time.Hour)) {
		t.Fatalf("%+v, %v", g, err)
	}
	if want := `allows "git_log" with 2 arguments matching "-n" "[0-9]+" (each in full, and within its policy) in workspace "/src/app", until 2026-11-25 13:00 UTC`; g.Describe() != want {
		t.Errorf("Describe:\n got %s\nwant %s", g.Describe(), want)
	}
	for _, f := range []GrantFlags{
		{Gate: "g", Args: []string{"2=x"}},        // argument 1 missing
		{Gate: "g", Args: []string{"1=x", "1=y"}}, // twice
		{Gate: "g", Args: []string{"0=x"}},        // from 1
		{Gate: "g", Exact: []string{"a"}},         // no --exact
		{Gate: "g"},                               // no scope
		{Gate: "g", Any: true, IsExact: true},     // two scopes
	} {
		if _, err := f.Grant(now); err == nil {
			t.Errorf("%+v: accepted", f)
		}
	}
}
