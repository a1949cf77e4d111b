package integration

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// TestParallelCallers runs 8 callers making 50 calls each at once: every
// output is the caller's own, and the result lists all 400 calls.
func TestParallelCallers(t *testing.T) {
	const workers, calls = 8, 50
	script := fmt.Sprintf(`
w=1
while [ $w -le %d ]; do
	(
		j=1
		while [ $j -le %d ]; do
			o=$(gb_echo "w$w" "c$j" "$(printf 'x\ty')") || echo "w$w c$j: exit $?"
			[ "$o" = "w$w c$j $(printf 'x\ty')" ] || echo "w$w c$j: got $o"
			echo "$o"
			j=$((j+1))
		done
	) > "$TMPDIR/out.$w" &
	w=$((w+1))
done
wait
cat "$TMPDIR"/out.*
`, workers, calls)
	var want []string
	for w := 1; w <= workers; w++ {
		for j := 1; j <= calls; j++ {
			want = append(want, fmt.Sprintf("w%d c%d x\ty", w, j))
		}
	}
	sort.Strings(want)
	forEachBackend(t, func(t *testing.T, backend string) {
		res, out := gbJSON(t, backend, Run{Command: []string{"sh", "-c", script}})
		if out.Code != 0 || res.Stderr != "" {
			t.Errorf("exit %d, stderr %q", out.Code, res.Stderr)
		}
		got := strings.Split(strings.TrimSuffix(res.Stdout, "\n"), "\n")
		sort.Strings(got)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("outputs differ: %d lines, want %d; first lines %q", len(got), len(want), got[:min(5, len(got))])
		}
		if len(res.Calls) != workers*calls {
			t.Fatalf("%d calls in the result, want %d", len(res.Calls), workers*calls)
		}
		wantArgs := map[string]bool{}
		for _, w := range want {
			wantArgs[w] = true
		}
		ids := map[string]bool{}
		for _, c := range res.Calls {
			a := strings.Join(c.Args, " ")
			if c.Gate != "gb_echo" || c.ExitCode != 0 || c.Error != "" || !wantArgs[a] || ids[c.ID] {
				t.Errorf("call %+v", c)
			}
			delete(wantArgs, a)
			ids[c.ID] = true
		}
		if len(wantArgs) != 0 {
			t.Errorf("%d calls missing from the result", len(wantArgs))
		}
	})
}
