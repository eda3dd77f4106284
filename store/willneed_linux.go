package store

import (
	"os"

	"golang.org/x/sys/unix"
)

// willNeed asks the kernel to read [off, off+n) of f into the page cache
// (posix_fadvise WILLNEED): it queues the reads and returns.
func willNeed(f *os.File, off, n int64) error {
	return unix.Fadvise(int(f.Fd()), off, n, unix.FADV_WILLNEED)
}
