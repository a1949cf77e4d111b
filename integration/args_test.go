package integration

import (
	"fmt"
	"strings"
	"testing"
)

// roundTripArgs are arguments that must reach a gate byte for byte.
var roundTripArgs = []string{
	"plain",
	"two words",
	"  lead and trail  ",
	"",
	`it's "quoted"`,
	`'`,
	`"`,
	"line1\nline2",
	"trailing newline\n",
	"\n\n",
	"tab\there\t",
	`$HOME $(id) ` + "`id`" + ` ${x:-y} $1 $@`,
	`back\slash\\ \n \t \0 \x41`,
	`%s %d %% %b \045`,
	"-n",
	"-e",
	"--",
	"-",
	"--help",
	"*",
	"?",
	"[a-z]*",
	"{a,b}",
	"~",
	"\xff\xfe non-utf8 \x80",
	"héllo ✓ 日本",
	"\x01\x1b[31mctl\x7f",
	"; rm -rf / #",
	"a=b",
	"|&<>()",
	strings.Repeat("long-", 20000),
}

// TestArgsRoundTrip sends every argument through gb_echo under each shell
// the backend has, all at once and one at a time, and compares the bytes.
func TestArgsRoundTrip(t *testing.T) {
	var script strings.Builder
	script.WriteString("set --")
	for _, a := range roundTripArgs {
		script.WriteString(" \\\n\t" + quoteSh(a))
	}
	script.WriteString("\ngb_echo \"$@\"\nfor a do gb_echo \"$a\" || echo \"failed: $?\"; done\n")

	var want1 strings.Builder
	want1.WriteString(strings.Join(roundTripArgs, " ") + "\n")
	for _, a := range roundTripArgs {
		want1.WriteString(a + "\n")
	}

	forEachBackend(t, func(t *testing.T, backend string) {
		ws := workspace(t)
		// Files a glob would match if a wrapper forgot to quote.
		writeFiles(t, ws, map[string]string{"args.sh": script.String(), "a": "", "abc": "", "b": ""})
		var driver, want strings.Builder
		for _, shell := range shellsIn(backend) {
			fmt.Fprintf(&driver, "echo '== %s'; %s ./args.sh; echo \"== $?\"\n", shell, shell)
			fmt.Fprintf(&want, "== %s\n%s== 0\n", shell, want1.String())
		}
		// bash's own quoting, $'…', for bytes typed as escapes.
		driver.WriteString(`bash -c 'gb_echo $'"'"'\xff\x01 \t\n'"'"' "$(printf "\\377x")"'` + "\n")
		want.WriteString("\xff\x01 \t\n \xffx\n")
		out := gb(t, backend, Run{Dir: ws, Command: []string{"sh", "-c", driver.String()}})
		if out.Code != 0 || out.Stderr != "" {
			t.Errorf("exit %d, stderr %q", out.Code, out.Stderr)
		}
		if out.Stdout != want.String() {
			got, exp := strings.Split(out.Stdout, "\n"), strings.Split(want.String(), "\n")
			for i := range max(len(got), len(exp)) {
				var g, e string
				if i < len(got) {
					g = got[i]
				}
				if i < len(exp) {
					e = exp[i]
				}
				if g != e {
					t.Fatalf("output differs at line %d:\n got %.200q\nwant %.200q", i+1, g, e)
				}
			}
			t.Fatalf("output differs")
		}
	})
}
