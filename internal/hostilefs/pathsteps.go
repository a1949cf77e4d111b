package hostilefs

// PathStep is a directory or symbolic link on the way to a path: whoever
// may change it chooses where the path leads.
type PathStep struct {
	Path string
	UID  int
	Mode uint32 // st_mode
	Link bool
}

// OpenToOthers reports whether a directory step may be changed by group
// or others: writable to them and not sticky.
func (s PathStep) OpenToOthers() bool {
	return !s.Link && s.Mode&0o022 != 0 && s.Mode&0o1000 == 0
}
