package connpool

import (
	"crypto/tls"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// progress says what the kernel knows of a pending connection's bytes:
// whether any ever came (TCP_INFO's bytes received, Linux 4.1), and how
// many are waiting, not read yet (SIOCINQ). ok is false when it cannot
// tell (not a TCP socket).
func progress(nc net.Conn) (received bool, unread int, ok bool) {
	if tc, isTLS := nc.(*tls.Conn); isTLS {
		nc = tc.NetConn()
	}
	sc, isSys := nc.(syscall.Conn)
	if !isSys {
		return false, 0, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false, 0, false
	}
	rc.Control(func(fd uintptr) {
		info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			return
		}
		n, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ)
		if err != nil {
			return
		}
		received, unread, ok = info.Bytes_received > 0, n, true
	})
	return received, unread, ok
}
