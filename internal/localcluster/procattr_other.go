//go:build !linux

package localcluster

import "syscall"

// childAttr puts a child in its own process group, so a Ctrl-C at the terminal reaches only
// the launcher, which then kills its children in order.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
