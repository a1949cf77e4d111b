//go:build !linux

package bwrap

import (
	"errors"
	"os"
	"syscall"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/internal/proc"
)

// Outside Linux there is no bwrap to run: its entry is for linux only,
// and a Run fails in [proc.Run] with a hint. These stand in for
// bwrap_linux.go and cgroup_linux.go.

func newNSTree(*os.Process, *bwrapStatus) proc.Tree { return nil }

func newSessionKeyring() error { return nil }

type limitCgroup struct{}

func newLimitCgroup(sandbox.Limits) (*limitCgroup, error) { return nil, nil }
func (*limitCgroup) remove()                              {}
func (*limitCgroup) enter() error                         { return nil }
func (*limitCgroup) leave()                               {}
func (*limitCgroup) report() string                       { return "" }
func (*limitCgroup) adopt(int) error                      { return nil }

func pinPath(string) (*os.File, error)                      { return nil, errors.New("needs Linux") }
func dataFile([]byte) (*os.File, error)                     { return nil, errors.New("needs Linux") }
func stopNamespace(*bwrapStatus)                            {}
func unreachable(string, uint32, uint32, bool, bool) string { return "" }
func isolateAttr(a *syscall.SysProcAttr, _ *syscall.Credential) *syscall.SysProcAttr {
	return a
}

// LimitsMechanism says how limits are enforced here: not at all.
func LimitsMechanism() (string, string) { return "none", "memory, cpus, pids: needs Linux" }

// PruneCgroups removes nothing: no limit cgroups outside Linux.
func PruneCgroups() []string { return nil }
