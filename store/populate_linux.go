package store

import (
	"os"

	"golang.org/x/sys/unix"
)

// osPageSize is the kernel's page: madvise takes addresses aligned to it.
var osPageSize = int64(os.Getpagesize())

// madvisePopulate maps the n bytes of a mapping at addr into the process's
// page tables, reading those not in the page cache (madvise
// MADV_POPULATE_READ, Linux 5.14 on; EINVAL before). A raw system call:
// the mapping is bbolt's, known here by its address only.
func madvisePopulate(addr, n uintptr) error {
	if _, _, errno := unix.Syscall(unix.SYS_MADVISE, addr, n, unix.MADV_POPULATE_READ); errno != 0 {
		return errno
	}
	return nil
}
