package control

import "github.com/gatebridge/gatebridge/bridge"

// DefaultMaxGateCalls is Options.MaxGateCalls when left zero.
const DefaultMaxGateCalls = 100

// gateCalls are the records of the calls a process's command made: the
// first max of those its session kept, and how many more were only
// counted (past max, past bridge.limits.max_records, or ignored in a
// flood past max_calls).
func gateCalls(sess *bridge.Session, res *bridge.Result, max int) ([]bridge.CallRecord, int) {
	var calls []bridge.CallRecord
	dropped := 0
	if res != nil {
		calls, dropped = res.Calls, res.CallsOmitted+max0(res.CallsIgnored-1)
	} else {
		calls, dropped = sess.Dispatcher().Records()
	}
	if len(calls) > max {
		dropped += len(calls) - max
		calls = calls[:max:max]
	}
	if calls == nil {
		calls = []bridge.CallRecord{}
	}
	return calls, dropped
}

// max0 is n, or 0 when negative. The first ignored entry is recorded
// (bridge.Result.CallsIgnored): the others were dropped.
func max0(n int) int { return max(n, 0) }
