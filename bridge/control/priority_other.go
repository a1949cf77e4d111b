//go:build !linux

package control

func lowerThreadPriority() {}
