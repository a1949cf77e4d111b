package bridge

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"
)

// exactField is a string field of a JSON object by the rule of
// docs/json.md: its base64 sibling when there is one, else the field.
func exactField(t *testing.T, b []byte, field, sibling string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if s, ok := m[sibling].(string); ok {
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	s, _ := m[field].(string)
	return s
}

// A gate name is validated when a gate is registered, not when the
// sandbox calls one: a call file may name any bytes (the mailbox caps the
// name's length only), and the record of that unknown gate (run --json's
// calls, the audit log, process/exited's gateCalls) carried a name that
// is not UTF-8 as U+FFFD, so "\xff" and "\xfe" read the same. The record
// now carries its exact bytes in gate_base64, as it does the arguments'.
func TestUnknownGateNameExact(t *testing.T) {
	d, err := NewDispatcher(Config{Gates: testRegistry(t)}, "s")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"no\xff", "no\xfe", "no_such"} {
		resp := d.Dispatch(context.Background(), &Request{ID: "u", Gate: name})
		d.Record(resp.Record)
	}
	recs, _ := d.Records()
	if len(recs) != 3 {
		t.Fatalf("%d records", len(recs))
	}
	for i, want := range []string{"no\xff", "no\xfe", "no_such"} {
		b, err := json.Marshal(recs[i])
		if err != nil {
			t.Fatal(err)
		}
		if recs[i].Decision != DecisionUnknown {
			t.Errorf("%q: decision %s", want, recs[i].Decision)
		}
		if got := exactField(t, b, "gate", "gate_base64"); got != want {
			t.Errorf("record %s: the gate reads %q, want %q", b, got, want)
		}
	}
}
