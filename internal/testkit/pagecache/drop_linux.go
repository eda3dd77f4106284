package pagecache

import (
	"os"
	"testing"
	"unsafe"

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

// Resident returns how many of the file's pages at path are in the page
// cache, and how many it has (mincore of a mapping of it). A failure
// fails tb.
func Resident(tb testing.TB, path string) (in, pages int) {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		tb.Fatal(err)
	}
	if fi.Size() == 0 {
		return 0, 0
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		tb.Fatal(err)
	}
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		tb.Fatal(e)
	}
	for _, v := range vec {
		in += int(v & 1)
	}
	return in, len(vec)
}
