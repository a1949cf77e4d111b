// Package buildinfo says what a gatebridge binary is: its module
// version, the commit it was built from and the Go that built it
// (`gatebridge version`, `gatebridge --version`).
//
// The values come from [debug.ReadBuildInfo] (a `go install …@v1.2.3`
// knows its version; a build in a git checkout its commit, unless
// -buildvcs=false), overridden by what the build passed with -ldflags
// -X (the Makefile passes `git describe` output when a v* tag exists,
// and the commit).
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Info is what a binary knows about its build.
type Info struct {
	Version   string // v1.2.3, a pseudo-version, or "dev"
	Commit    string // full hash, "" when unknown
	Time      string // commit time (RFC 3339), "" when unknown
	Modified  bool   // built from a tree with uncommitted changes
	GoVersion string // go1.26.0
	Platform  string // linux/amd64
}

// Read is this binary's build information. version and commit are the
// -ldflags -X values ("" when not set); commit may end in "-dirty", as
// `git describe --dirty` prints it.
func Read(version, commit string) Info {
	in := Info{GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		in = fromBuildInfo(bi, in)
	}
	return override(in, version, commit)
}

func fromBuildInfo(bi *debug.BuildInfo, in Info) Info {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		in.Version = v
	}
	if bi.GoVersion != "" {
		in.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Commit = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

func override(in Info, version, commit string) Info {
	if version != "" {
		in.Version = version
	}
	if commit != "" {
		in.Commit, in.Modified = strings.CutSuffix(commit, "-dirty")
		in.Time = ""
	}
	if in.Version == "" {
		in.Version = "dev"
	}
	return in
}

// String is the text `gatebridge version` prints: the name and version
// on the first line, then the commit and the Go that built it.
//
//	gatebridge v1.2.3
//	commit 0123456789abcdef0123456789abcdef01234567 (modified), 2026-11-25T13:14:00Z
//	go1.26.0 linux/amd64
func (in Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "gatebridge %s\n", in.Version)
	switch {
	case in.Commit == "":
		b.WriteString("commit unknown (built without version control information)\n")
	default:
		b.WriteString("commit " + in.Commit)
		if in.Modified {
			b.WriteString(" (modified)")
		}
		if in.Time != "" {
			b.WriteString(", " + in.Time)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "%s %s\n", in.GoVersion, in.Platform)
	return b.String()
}
