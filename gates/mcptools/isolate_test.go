package mcptools

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/gatebridge/gatebridge/gates"
)

// recordingIsolator runs the server on the host and records what the
// isolator contract asks of it.
type recordingIsolator struct {
	mu       sync.Mutex
	specs    []gates.IsolateSpec
	cleanups int
	waited   []bool // per cleanup: the server had been waited for
}

func (r *recordingIsolator) Isolate(_ context.Context, cmd *exec.Cmd, s gates.IsolateSpec) (func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.specs = append(r.specs, s)
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.cleanups++
		r.waited = append(r.waited, cmd.ProcessState != nil)
	}, nil
}

// A stdio server runs through the isolator by default; with none it is
// refused (fail closed) unless isolate.host; isolate on a url server is
// an error. The isolated server's sandbox lives as long as the server:
// cleanup runs once the session is closed and the server waited for, and
// a server started again after a crash is isolated again.
func TestKindIsolatesStdioServers(t *testing.T) {
	k, ctx := mcpKind(t), context.Background()
	var se *gates.SettingError
	_, err := k.New(ctx, testServer("add"), gates.Env{})
	if !errors.As(err, &se) || se.Field != "isolate" || !strings.Contains(se.Help("mcp.servers.t"), "mcp.servers.t.isolate: {host: true}") {
		t.Errorf("no isolator: %v", err)
	}
	_, err = k.New(ctx, Server{Name: "u", URL: "http://127.0.0.1:1/", Isolate: gates.IsolateSpec{Host: true}}, gates.Env{})
	if !errors.As(err, &se) || se.Field != "isolate" {
		t.Errorf("isolate on a url server: %v", err)
	}

	iso := &recordingIsolator{}
	s := testServer()
	s.Isolate = gates.IsolateSpec{Read: []string{"/usr"}}
	reg := gates.NewRegistry()
	if _, err := k.Add(ctx, reg, s, gates.Env{Isolator: iso}); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := call(t, reg, "t_add", "", "a=1", "b=2"); code != 0 || out != "{\"sum\":3}\n" {
		t.Fatalf("add: %d %q %q", code, out, errOut)
	}
	call(t, reg, "t_crash", "")
	if code, out, errOut := call(t, reg, "t_add", "", "a=2", "b=2"); code != 0 || out != "{\"sum\":4}\n" {
		t.Fatalf("add after a crash: %d %q %q", code, out, errOut)
	}
	reg.Close()
	iso.mu.Lock()
	defer iso.mu.Unlock()
	if len(iso.specs) != 2 || strings.Join(iso.specs[0].Read, ",") != "/usr" {
		t.Errorf("isolated starts: %+v", iso.specs)
	}
	if iso.cleanups != 2 || !iso.waited[0] || !iso.waited[1] {
		t.Errorf("cleanups %d, each after the server was waited for: %v", iso.cleanups, iso.waited)
	}
}
