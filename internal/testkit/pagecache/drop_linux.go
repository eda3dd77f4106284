package pagecache

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// Drop writes the file at path out (fsync: dirty pages stay cached) and
// drops its pages from the page cache (posix_fadvise DONTNEED), all but
// those a process has mapped. A failure fails tb.
func Drop(tb testing.TB, path string) {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		tb.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		tb.Fatal(err)
	}
}
