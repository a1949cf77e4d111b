//go:build !linux

package rpc

func yieldCPU() {}

func lowerThreadPriority() {}
