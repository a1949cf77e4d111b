//go:build unix

package gates

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

const commandsSupported = true

// setProcessGroup starts cmd as the leader of a new process group, so the
// command and everything it starts can be killed together.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup sends SIGKILL to the process group led by pid.
func killGroup(pid int) error {
	err := syscall.Kill(-pid, syscall.SIGKILL)
	if err == syscall.ESRCH {
		return os.ErrProcessDone
	}
	return err
}

// exitStatus is the shell-style status: the exit code, or 128+N after
// signal N.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// TrustedCommand resolves path (symlinks included) and refuses it when the
// sandbox could have written it: inside one of untrusted, or when the file
// or a directory above it is owned by a user other than root and us, or is
// writable by group or others (a sticky directory such as /tmp only
// protects names, so the file itself must still pass).
func TrustedCommand(path string, untrusted []string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	if ru := UntrustedDir(untrusted, real); ru != "" {
		return "", fmt.Errorf("%s resolves to %s, inside %s, which the sandbox can write; use a command installed outside it", path, real, ru)
	}
	me := uint32(os.Geteuid())
	for p := real; ; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		if err != nil {
			return "", err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return "", fmt.Errorf("%s: no owner information", p)
		}
		if st.Uid != 0 && st.Uid != me {
			return "", fmt.Errorf("%s (for %s) is owned by uid %d, not root or us: that user could replace the command; install it somewhere only root or you can write", p, path, st.Uid)
		}
		perm := fi.Mode()
		writable := perm.Perm()&0o022 != 0
		if writable && !(fi.IsDir() && perm&os.ModeSticky != 0) {
			return "", fmt.Errorf("%s (for %s) is writable by group or others (mode %v): they could replace the command; chmod go-w it", p, path, perm.Perm())
		}
		if p == "/" || p == filepath.Dir(p) {
			break
		}
	}
	return real, nil
}
