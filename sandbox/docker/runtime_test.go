package docker

import (
	"context"
	"encoding/json"
	"testing"
)

func TestRuntimesReport(t *testing.T) {
	b, _ := newBackend(t, Config{})
	rs, err := b.Runtimes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		j, _ := json.Marshal(r)
		t.Logf("%s", j)
	}
}
