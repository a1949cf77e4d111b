package docker

import (
	"testing"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
	"github.com/gatebridge/gatebridge/sandbox"
)

// The docker backend does not import the mailbox format, yet names two of
// its things: the lease FIFO in a session root, and the session's layout
// inside (a bridge session rebased at SessionPath). They must stay the
// format's.
func TestNamesAreTheMailboxFormats(t *testing.T) {
	if leaseName != mailbox.FileLease {
		t.Errorf("leaseName %q, the mailbox format's FileLease is %q", leaseName, mailbox.FileLease)
	}
	host := sandbox.SessionDirs(mailbox.LayoutAt("/dev/shm/gatebridge/gb-x"))
	if got, want := host.Rebase(DefaultSessionPath), sandbox.SessionDirs(mailbox.LayoutAt(DefaultSessionPath)); got != want {
		t.Errorf("inside layout %+v, the format's is %+v", got, want)
	}
}
