package store

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// willNeed asks the kernel to read [off, off+n) of f into the page cache
// (posix_fadvise WILLNEED): it queues the reads and returns.
func willNeed(f *os.File, off, n int64) error {
	return unix.Fadvise(int(f.Fd()), off, n, unix.FADV_WILLNEED)
}

// cached says whether each of samples pages spread evenly over the first
// size bytes of f is in the page cache (mincore of a mapping of its own):
// a few system calls, no read. False when it cannot tell.
func cached(f *os.File, size int64, samples int) bool {
	ps := int64(os.Getpagesize())
	pages := size / ps
	if pages == 0 || samples <= 0 {
		return false
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(pages*ps), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return false
	}
	defer unix.Munmap(data)
	vec := make([]byte, 1)
	for i := range int64(samples) {
		at := (2*i + 1) * pages / (2 * int64(samples)) * ps // the middle of each of samples stretches
		if !resident(data[at:at+ps], vec) {
			return false
		}
	}
	return true
}

// resident is mincore(2) of page, one byte of vec: x/sys has no wrapper.
func resident(page, vec []byte) bool {
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&page[0])), uintptr(len(page)), uintptr(unsafe.Pointer(&vec[0])))
	return errno == 0 && vec[0]&1 != 0
}
