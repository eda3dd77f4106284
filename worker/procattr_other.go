//go:build !linux

package worker

import "syscall"

// setPdeathsig does nothing: only Linux has a parent-death signal. The
// group's watcher still kills the job when the worker dies.
func setPdeathsig(*syscall.SysProcAttr) {}
