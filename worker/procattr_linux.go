package worker

import "syscall"

// setPdeathsig has the kernel SIGKILL the process when the worker dies.
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
