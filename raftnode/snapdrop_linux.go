package raftnode

import (
	"os"

	"golang.org/x/sys/unix"
)

// dropCached asks the kernel to drop f's cached pages of [off, off+n), or
// from off to the end if n is 0 (posix_fadvise DONTNEED): a hint, so its
// error is of no use. Pages not yet written back stay, as do large folios
// the range covers only in part.
func dropCached(f *os.File, off, n int64) {
	_ = unix.Fadvise(int(f.Fd()), off, n, unix.FADV_DONTNEED)
}
