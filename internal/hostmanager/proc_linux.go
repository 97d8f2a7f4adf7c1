//go:build linux

package hostmanager

import "syscall"

// sysProcAttr makes the kernel send SIGTERM to a child when its parent dies, so process hosts
// never outlive a control plane that was killed without a chance to stop them.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
