package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-11-25T13:14:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	in := override(fromBuildInfo(bi, Info{Platform: "linux/amd64"}), "", "")
	want := "gatebridge v1.2.3\ncommit 0123456789abcdef0123456789abcdef01234567 (modified), 2026-11-25T13:14:00Z\ngo1.26.0 linux/amd64\n"
	if got := in.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestDevel(t *testing.T) {
	// A local build without VCS stamping: "(devel)" is not a version.
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}
	in := override(fromBuildInfo(bi, Info{Platform: "linux/amd64"}), "", "")
	if in.Version != "dev" || in.Commit != "" {
		t.Fatalf("%+v", in)
	}
	if !strings.Contains(in.String(), "commit unknown") {
		t.Errorf("no unknown commit line:\n%s", in)
	}
}

func TestOverride(t *testing.T) {
	// What the Makefile passes wins over the build info's.
	bi := &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261125131400-0123456789ab"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789ab"}, {Key: "vcs.time", Value: "2026-11-25T13:14:00Z"},
	}}
	in := override(fromBuildInfo(bi, Info{}), "v1.0.0-3-gabcdef", "abcdef0123-dirty")
	if in.Version != "v1.0.0-3-gabcdef" || in.Commit != "abcdef0123" || !in.Modified || in.Time != "" {
		t.Fatalf("%+v", in)
	}
	in = override(fromBuildInfo(bi, Info{}), "", "abcdef0123")
	if in.Version != "v0.0.0-20261125131400-0123456789ab" || in.Modified {
		t.Fatalf("%+v", in)
	}
}
