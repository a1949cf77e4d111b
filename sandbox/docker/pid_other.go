//go:build !unix

package docker

// pidAlive cannot check processes here; it assumes they are alive so Prune
// never removes a container that may still be in use.
func pidAlive(pid int) bool { return pid > 0 }

func procStart(int) string { return "" }

func ownerAlive(pid int, _ string) bool { return pidAlive(pid) }
