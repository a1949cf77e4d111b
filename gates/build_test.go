package gates

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// Build names the setting at fault: the source's key, a SettingError's
// field below it, and the kind's hint over the source's.
func TestBuildNamesTheSetting(t *testing.T) {
	kinds := NewKindRegistry()
	bad := Source{Kind: KindCommand, Key: "gates.commands[1]", Hint: "see the docs", Settings: CommandSpec{Name: "x"}}
	good := Source{Kind: KindCommand, Key: "gates.commands[0]", Settings: CommandSpec{Name: "ok", Command: []string{"/bin/true"}, Isolate: IsolateSpec{Host: true}}}
	reg, _, err := kinds.Build(context.Background(), []Source{good, bad}, Env{}, nil)
	var se *SourceError
	if !errors.As(err, &se) || !strings.HasPrefix(se.Key, "gates.commands[1]") || se.Help == "" || reg != nil {
		t.Fatalf("reg %v, err %v (%+v)", reg, err, se)
	}
	if _, _, err := kinds.Build(context.Background(), []Source{{Kind: "nope", Key: "k"}}, Env{}, nil); err == nil {
		t.Fatal("unknown kind accepted")
	}
	reg, kindOf, err := kinds.Build(context.Background(), []Source{good}, Env{}, nil)
	if err != nil || kindOf["ok"] != KindCommand {
		t.Fatalf("kindOf %v, err %v", kindOf, err)
	}
	reg.Close()
}
