package control

import (
	"strings"

	"github.com/gatebridge/gatebridge/sandbox"
)

// DescribeShell says what a command can count on between calls and
// around it, true for the backend and settings in use: whether files
// written in the workspace persist (writable) or cannot be written,
// whether /tmp is kept, and the network. known is false when the backend
// states no Facts: then /tmp and the network are not described. For the
// capability text and the MCP tool's description.
func DescribeShell(f sandbox.Facts, known, writable bool) string {
	var b strings.Builder
	switch {
	case writable:
		b.WriteString("Files written in the workspace persist between calls. ")
	case known && f.Unconfined:
		b.WriteString("The workspace is meant to be read-only, but this backend runs commands unconfined on the host: do not write it. ")
	default:
		b.WriteString("The workspace is read-only: write scratch files under /tmp. ")
	}
	if !known {
		return b.String()
	}
	switch {
	case f.TmpHost:
		b.WriteString("/tmp is the host's own, kept between calls and shared with other programs. ")
	case f.TmpKept:
		b.WriteString("/tmp is kept between calls of this sandbox. ")
	case writable:
		b.WriteString("/tmp starts empty in every call: keep what must last in the workspace. ")
	default:
		b.WriteString("/tmp starts empty in every call. ")
	}
	if f.Network == "" {
		b.WriteString("There is no network. ")
	} else {
		b.WriteString("Network: " + f.Network + ". ")
	}
	return b.String()
}

// DescribeShell is DescribeShell for this sandbox, with its backend's
// Facts when it states them: a long-lived sandbox's (docker under serve
// and MCP keeps /tmp between processes) when there is one.
func (sb *Sandbox) DescribeShell() string {
	if r, ok := sb.backend.(sandbox.FactsReporter); ok {
		return DescribeShell(r.Facts(), true, sb.writable)
	}
	return DescribeShell(sandbox.Facts{}, false, sb.writable)
}
