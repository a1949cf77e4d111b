// Package configview lists a decoded configuration as flat keys with
// their values, values that may hold a secret redacted, for `gatebridge
// config show`.
//
// Keys are the struct's mapstructure tags joined by dots
// (sandbox.docker.image), as the config file nests them; an element of a
// list of sections is KEY[i] (gates.commands[0].name, as errors name
// it) and an entry of a map of sections KEY.NAME (mcp.servers.docs.url).
// Inside those, only the keys that are set are listed (the rest take
// their defaults where they are used).
//
// # Redaction
//
// A value is shown as [Redacted] when its key's last part names a secret
// (token, password, secret, authorization, cookie, credential, api_key,
// apikey, private_key), for every value of a headers map, for the value of
// each NAME=VALUE entry of an env list (NAME stays: a bare NAME, passed
// from the host's environment, is shown as is), and for the password and
// the secret-named query parameters of a URL. Everything else, command
// lines included, is shown as it is.
package configview

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/gatebridge/gatebridge/internal/suggest"
)

// Redacted replaces a value that may hold a secret.
const Redacted = "<redacted>"

// An Entry is one key of a configuration.
type Entry struct {
	Key    string
	Value  string // as YAML reads it back: a quoted string, a number, a flow list
	Source string // where the value came from (default, file PATH, env VAR, flag --NAME)
}

// Flatten lists every key of cfg (a struct, or a pointer to one, with
// mapstructure tags) in the struct's order, values rendered and
// redacted; source says where each top-level key's value came from.
// A list or map of sections takes its source from its own key.
func Flatten(cfg any, source func(key string) string) []Entry {
	var out []Entry
	walk(reflect.Indirect(reflect.ValueOf(cfg)), "", "", false, source, &out)
	return out
}

// walk adds the keys of struct v under prefix; in a list or map entry
// (sparse) only set keys, all with the source of the key entry.
func walk(v reflect.Value, prefix, entry string, sparse bool, source func(string) string, out *[]Entry) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("mapstructure")
		if tag == "" || !f.IsExported() {
			continue
		}
		key, fv := prefix+tag, v.Field(i)
		src := func() string {
			if entry != "" {
				return source(entry)
			}
			return source(key)
		}
		switch {
		case sparse && fv.IsZero():
		case f.Type.Kind() == reflect.Struct:
			walk(fv, key+".", entry, sparse, source, out)
		case f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct && !fv.IsNil():
			walk(fv.Elem(), key+".", entry, sparse, source, out) // an optional section that is set (policy.commands)
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			if fv.Len() == 0 {
				*out = append(*out, Entry{key, "[]", src()})
			}
			for j := range fv.Len() {
				walk(fv.Index(j), fmt.Sprintf("%s[%d].", key, j), cmpOr(entry, key), true, source, out)
			}
		case f.Type.Kind() == reflect.Map && f.Type.Elem().Kind() == reflect.Struct:
			if fv.Len() == 0 {
				*out = append(*out, Entry{key, "{}", src()})
			}
			names := make([]string, 0, fv.Len())
			for _, k := range fv.MapKeys() {
				names = append(names, k.String())
			}
			slices.Sort(names)
			for _, n := range names {
				walk(fv.MapIndex(reflect.ValueOf(n)), key+"."+n+".", cmpOr(entry, key+"."+n), true, source, out)
			}
		default:
			*out = append(*out, Entry{key, render(key, fv), src()})
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// render is v as YAML reads it back, redacted for key.
func render(key string, v reflect.Value) string {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "null"
		}
		v = v.Elem()
	}
	if d, ok := v.Interface().(time.Duration); ok {
		return d.String()
	}
	leaf := key[strings.LastIndexAny(key, ".]")+1:]
	switch v.Kind() {
	case reflect.String:
		return quote(RedactValue(leaf, v.String()))
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range v.Len() {
			s := fmt.Sprint(v.Index(i).Interface())
			if leaf == "env" {
				s = RedactEnv(s)
			} else {
				s = RedactValue(leaf, s)
			}
			parts[i] = quote(s)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case reflect.Map:
		names := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			names = append(names, k.String())
		}
		slices.Sort(names)
		parts := make([]string, len(names))
		for i, n := range names {
			val := fmt.Sprint(v.MapIndex(reflect.ValueOf(n)).Interface())
			if leaf == "headers" || secretName(n) {
				val = Redacted
			}
			parts[i] = quote(n) + ": " + quote(val)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v.Interface())
}

// quote is s as a double-quoted string (JSON's escapes, which YAML
// reads; invalid UTF-8 becomes U+FFFD).
func quote(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

var secretWords = []string{"token", "password", "passwd", "secret", "authorization", "cookie", "credential", "api_key", "apikey", "private_key"}

// secretName reports whether a key or name says its value is a secret.
func secretName(name string) bool {
	n := strings.ToLower(strings.ReplaceAll(name, "-", "_"))
	return slices.ContainsFunc(secretWords, func(w string) bool { return strings.Contains(n, w) })
}

// RedactValue is value, or [Redacted] when key names a secret; a URL
// loses its password and its secret-named query parameters.
func RedactValue(key, value string) string {
	if secretName(key) {
		return Redacted
	}
	u, err := url.Parse(value)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return value
	}
	changed := false
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), Redacted)
		changed = true
	}
	q := u.Query()
	for name := range q {
		if secretName(name) {
			q[name] = []string{Redacted}
			changed = true
		}
	}
	if !changed {
		return value
	}
	u.RawQuery = q.Encode()
	return strings.ReplaceAll(u.String(), url.QueryEscape(Redacted), Redacted)
}

// RedactEnv is an env entry NAME=VALUE as NAME=<redacted>; a bare NAME
// (taken from the host's environment) stays.
func RedactEnv(entry string) string {
	if name, _, ok := strings.Cut(entry, "="); ok {
		return name + "=" + Redacted
	}
	return entry
}

// Write prints entries one a line, "KEY: VALUE  # SOURCE", the sources
// aligned.
func Write(w io.Writer, entries []Entry) error {
	width := 0
	for _, e := range entries {
		width = max(width, len(e.Key)+2+len(e.Value))
	}
	width = min(width, 60)
	for _, e := range entries {
		kv := e.Key + ": " + e.Value
		if _, err := fmt.Fprintf(w, "%-*s  # %s\n", width, kv, e.Source); err != nil {
			return err
		}
	}
	return nil
}

// NearestKeys is, for each key in unknown that a file has in the section
// key of a struct of type t, the section's keys nearest to it
// ([suggest.Nearest]), in full: key.name.
func NearestKeys(t reflect.Type, key string, unknown []string) []string {
	var out []string
	for _, k := range unknown {
		for _, n := range suggest.Nearest(k, SectionKeys(t, key)) {
			out = append(out, key+"."+n)
		}
	}
	return out
}

// SectionKeys is the keys of the section that key names in a struct of
// type t, as the file spells them: "gates.commands[0]" (an element of a
// list of sections), "mcp.servers.docs" (an entry of a map of them),
// "sandbox". nil when key names no section.
func SectionKeys(t reflect.Type, key string) []string {
	for _, part := range strings.Split(key, ".") {
		name, index, _ := strings.Cut(part, "[")
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case t.Kind() == reflect.Map && index == "":
			t = t.Elem() // name is an entry's
			continue
		case t.Kind() != reflect.Struct:
			return nil
		}
		f, ok := fieldByTag(t, name)
		if !ok {
			return nil
		}
		t = f.Type
		for i := strings.Count(part, "["); i > 0; i-- {
			if t.Kind() != reflect.Slice {
				return nil
			}
			t = t.Elem()
		}
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var keys []string
	for i := range t.NumField() {
		if tag := t.Field(i).Tag.Get("mapstructure"); tag != "" {
			keys = append(keys, tag)
		}
	}
	return keys
}

func fieldByTag(t reflect.Type, tag string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if t.Field(i).Tag.Get("mapstructure") == tag {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}
