package rpc

import (
	"time"

	"github.com/gatebridge/gatebridge/internal/connpool"
)

// SetLogWindow sets the window of ServeListener's rate-limited refusal
// log, for listeners started after it; the returned function restores it.
func SetLogWindow(d time.Duration) (restore func()) {
	old := logWindow
	logWindow = d
	return func() { logWindow = old }
}

// SetHandshakeHook runs f on each connection's goroutine before it reads
// its handshake; the returned function removes it.
func SetHandshakeHook(f func()) (restore func()) {
	testHookHandshake = f
	return func() { testHookHandshake = nil }
}

// LogBurst is how many refusals are logged per window.
const LogBurst = logBurst

// SetIdleAfter sets how long a pending connection that sent nothing is
// young; the returned function restores it.
func SetIdleAfter(d time.Duration) (restore func()) { return connpool.SetIdleAfter(d) }
