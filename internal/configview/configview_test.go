package configview

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

type server struct {
	Command []string          `mapstructure:"command"`
	URL     string            `mapstructure:"url"`
	Headers map[string]string `mapstructure:"headers"`
	Env     []string          `mapstructure:"env"`
	Prefix  *string           `mapstructure:"prefix"`
	Timeout time.Duration     `mapstructure:"timeout"`
}

type command struct {
	Name string   `mapstructure:"name"`
	Env  []string `mapstructure:"env"`
	Args []struct {
		Name string `mapstructure:"name"`
	} `mapstructure:"args"`
}

type config struct {
	Sandbox struct {
		Backend string        `mapstructure:"backend"`
		Timeout time.Duration `mapstructure:"timeout"`
		Paths   []string      `mapstructure:"protected_paths"`
		Limits  struct {
			CPUs float64 `mapstructure:"cpus"`
		} `mapstructure:"limits"`
	} `mapstructure:"sandbox"`
	Token    string            `mapstructure:"api_token"`
	Commands []command         `mapstructure:"commands"`
	Servers  map[string]server `mapstructure:"servers"`
	Empty    map[string]server `mapstructure:"empty"`
	internal string
}

func TestFlatten(t *testing.T) {
	var c config
	c.Sandbox.Backend = "auto"
	c.Sandbox.Timeout = 10 * time.Minute
	c.Sandbox.Paths = []string{".git", "a\nb"}
	c.Sandbox.Limits.CPUs = 1.5
	c.Token = "s3cret-token"
	c.Commands = []command{{Name: "git_log", Env: []string{"GIT_TOKEN=abc", "HOME"}}}
	c.Commands[0].Args = append(c.Commands[0].Args, struct {
		Name string `mapstructure:"name"`
	}{"REV"})
	c.Servers = map[string]server{
		"fs":  {Command: []string{"/bin/fs-mcp", "--stdio"}, Env: []string{"API_KEY=xyz"}},
		"web": {URL: "https://user:hunter2@mcp.example.com/mcp?token=abc&q=1", Headers: map[string]string{"authorization": "Bearer abc", "x-team": "blue"}},
	}
	src := func(key string) string { return "src(" + key + ")" }
	got := Flatten(&c, src)
	var b strings.Builder
	for _, e := range got {
		b.WriteString(e.Key + " = " + e.Value + " ; " + e.Source + "\n")
	}
	want := `sandbox.backend = "auto" ; src(sandbox.backend)
sandbox.timeout = 10m0s ; src(sandbox.timeout)
sandbox.protected_paths = [".git", "a\nb"] ; src(sandbox.protected_paths)
sandbox.limits.cpus = 1.5 ; src(sandbox.limits.cpus)
api_token = "<redacted>" ; src(api_token)
commands[0].name = "git_log" ; src(commands)
commands[0].env = ["GIT_TOKEN=<redacted>", "HOME"] ; src(commands)
commands[0].args[0].name = "REV" ; src(commands)
servers.fs.command = ["/bin/fs-mcp", "--stdio"] ; src(servers.fs)
servers.fs.env = ["API_KEY=<redacted>"] ; src(servers.fs)
servers.web.url = "https://user:<redacted>@mcp.example.com/mcp?q=1&token=<redacted>" ; src(servers.web)
servers.web.headers = {"authorization": "<redacted>", "x-team": "<redacted>"} ; src(servers.web)
empty = {} ; src(empty)
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	// No secret survives anywhere in the output.
	var out strings.Builder
	if err := Write(&out, got); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"s3cret", "abc", "xyz", "hunter2", "Bearer"} {
		if strings.Contains(out.String(), secret) {
			t.Errorf("%q in the output:\n%s", secret, out.String())
		}
	}
}

func TestRedactValue(t *testing.T) {
	for _, tc := range []struct{ key, in, want string }{
		{"password", "x", Redacted},
		{"Client-Secret", "x", Redacted},
		{"url", "https://mcp.example.com/mcp", "https://mcp.example.com/mcp"},
		{"url", "https://u@h/p", "https://u@h/p"}, // a user without a password
		{"url", "http://h/?api_key=1&page=2", "http://h/?api_key=<redacted>&page=2"},
		{"summary", "not a url: token", "not a url: token"},
	} {
		if got := RedactValue(tc.key, tc.in); got != tc.want {
			t.Errorf("RedactValue(%q, %q) = %q, want %q", tc.key, tc.in, got, tc.want)
		}
	}
}

func TestWriteAligns(t *testing.T) {
	var b strings.Builder
	Write(&b, []Entry{{"a", "1", "default"}, {"bb.cc", `"x"`, "env GATEBRIDGE_BB_CC"}})
	want := "a: 1        # default\nbb.cc: \"x\"  # env GATEBRIDGE_BB_CC\n"
	if b.String() != want {
		t.Errorf("got\n%q\nwant\n%q", b.String(), want)
	}
}

func TestSectionKeys(t *testing.T) {
	typ := reflect.TypeOf(config{})
	for _, tc := range []struct {
		key  string
		want []string
	}{
		{"sandbox", []string{"backend", "timeout", "protected_paths", "limits"}},
		{"sandbox.limits", []string{"cpus"}},
		{"commands[0]", []string{"name", "env", "args"}},
		{"commands[0].args[2]", []string{"name"}},
		{"servers.docs", []string{"command", "url", "headers", "env", "prefix", "timeout"}},
		{"sandbox.backend", nil}, // a value, not a section
		{"commands", nil},        // a list, not one section
		{"nosuch", nil},
		{"sandbox[0]", nil},
	} {
		if got := SectionKeys(typ, tc.key); !slices.Equal(got, tc.want) {
			t.Errorf("SectionKeys(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}

func TestNearestKeys(t *testing.T) {
	got := NearestKeys(reflect.TypeOf(config{}), "commands[1]", []string{"nmae", "zzzzzz", "arg"})
	if want := []string{"commands[1].name", "commands[1].args"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
