//go:build !linux

package hostmanager

import "syscall"

// sysProcAttr has no parent-death signal outside Linux: children of a killed control plane
// keep running until stopped by hand (Stop still stops them on a clean shutdown).
func sysProcAttr() *syscall.SysProcAttr { return nil }
