package worker

import "syscall"

// setPdeathsig has the kernel SIGKILL the process when the worker dies.
// Linux sends it when the thread that started the process exits; the Go
// runtime ends a thread only when a goroutine locked to it exits locked,
// which the worker never does.
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
