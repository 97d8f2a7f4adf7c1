package localcluster

import "syscall"

// childAttr puts a child in its own process group (a Ctrl-C at the terminal reaches only the
// launcher, which then kills its children in order) and has the kernel kill it when the
// launcher dies, so a killed chaos run leaves no node or redis-server behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
