package gates

import (
	"context"
	"errors"
)

// A Source is one source of gates a configuration declares: the kind
// that builds it, the settings that kind takes, the config key that names
// the source in messages ("gates.commands[0]"), and the hint for an error
// that names none of its settings.
type Source struct {
	Kind, Key, Hint string
	Settings        any
}

// A SourceError is a kind's error about one [Source]: Key names the
// setting at fault (the source's key, with a [SettingError]'s field
// below it), Help says how to fix it (the kind's hint, or the source's).
type SourceError struct {
	Key  string
	Err  error
	Help string
}

func (e *SourceError) Error() string { return e.Key + ": " + e.Err.Error() }
func (e *SourceError) Unwrap() error { return e.Err }

// Hint says how to fix the setting.
func (e *SourceError) Hint() string { return e.Help }

// Build makes the gates srcs declare, source by source (a name an earlier
// gate took is a clash for a later one), each by its kind in r, with env,
// and says which kind each gate is (by name). warn, when set, hears about
// gates left out, prefixed with the source's key. A kind's error is a
// *SourceError; on error nothing stays open. The caller closes the
// registry (it stops what the gates hold, such as MCP servers).
func (r *KindRegistry) Build(ctx context.Context, srcs []Source, env Env, warn func(string)) (*Registry, map[string]string, error) {
	reg := NewRegistry()
	kindOf := map[string]string{}
	for _, src := range srcs {
		k, err := r.Lookup(src.Kind)
		if err != nil {
			reg.Close()
			return nil, nil, err
		}
		env.Warn = func(w string) {
			if warn != nil {
				warn(src.Key + ": " + w)
			}
		}
		names, err := k.Add(ctx, reg, src.Settings, env)
		if err != nil {
			reg.Close()
			return nil, nil, sourceError(src, err)
		}
		for _, n := range names {
			kindOf[n] = src.Kind
		}
	}
	return reg, kindOf, nil
}

// sourceError is a kind's error about src: its key names the setting at
// fault (a SettingError's field), with the kind's hint, or src's.
func sourceError(src Source, err error) *SourceError {
	key, help := src.Key, src.Hint
	var se *SettingError
	if errors.As(err, &se) {
		if se.Field != "" {
			key += "." + se.Field
		}
		if se.Help != nil {
			help = se.Help(src.Key)
		}
	}
	return &SourceError{Key: key, Err: err, Help: help}
}
