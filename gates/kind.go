package gates

import (
	"fmt"
	"strings"
)

// Names of the kinds of gates.
const (
	KindBuiltin = "builtin"
	KindCommand = "command"
)

// A Kind is one kind of gate a configuration can declare: the built-in
// gates, or a host command behind an argument policy. New validates the
// kind's settings and makes its gates; a program registers them.
type Kind struct {
	Name    string
	Summary string // one line, for `gatebridge gates` and doctor
	// Settings names the type New takes, for error messages.
	Settings string
	// New makes the gates settings declare, or says what is wrong with
	// them. settings must be of the kind's type (see Settings).
	New func(settings any) ([]Gate, error)
}

// kinds is every kind, in the order a configuration's gates are built.
var kinds = []Kind{
	{
		Name:     KindBuiltin,
		Summary:  "read_file, list_dir, search, write_file (with a writable root), submit, gb_echo",
		Settings: "gates.Options",
		New: func(s any) ([]Gate, error) {
			o, err := settingsOf[Options](KindBuiltin, s)
			if err != nil {
				return nil, err
			}
			return Builtins(o)
		},
	},
	{
		Name:     KindCommand,
		Summary:  "a host program with a fixed argv prefix; arguments checked against its policy",
		Settings: "gates.CommandSpec",
		New: func(s any) ([]Gate, error) {
			c, err := settingsOf[CommandSpec](KindCommand, s)
			if err != nil {
				return nil, err
			}
			g, err := NewCommand(c)
			if err != nil {
				return nil, err
			}
			return []Gate{g}, nil
		},
	},
}

// Kinds returns every kind of gate, in the order a configuration's gates
// are built.
func Kinds() []Kind { return append([]Kind(nil), kinds...) }

// LookupKind returns the kind called name; the error lists the kinds.
func LookupKind(name string) (Kind, error) {
	var names []string
	for _, k := range kinds {
		if k.Name == name {
			return k, nil
		}
		names = append(names, k.Name)
	}
	return Kind{}, fmt.Errorf("gates: unknown kind %q (kinds: %s)", name, strings.Join(names, ", "))
}

func settingsOf[T any](kind string, s any) (T, error) {
	v, ok := s.(T)
	if !ok {
		var zero T
		return zero, fmt.Errorf("gates: kind %s: settings are %T, want %T", kind, s, zero)
	}
	return v, nil
}
