package bwrap

// noCgroupError says this host offers gatebridge no cgroup to enforce
// limits with (not root, cgroup v2): the command runs without them, as
// doctor reports. Any other error of newLimitCgroup means the cgroup
// could be made but not set up as asked, and the run is refused.
type noCgroupError struct{ err error }

func (e *noCgroupError) Error() string { return e.err.Error() }
func (e *noCgroupError) Unwrap() error { return e.err }
