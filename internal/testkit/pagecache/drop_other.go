//go:build !linux

package pagecache

import "testing"

// Drop skips tb: posix_fadvise is Linux's here.
func Drop(tb testing.TB, _ string) {
	tb.Helper()
	tb.Skip("dropping a file from the page cache needs Linux")
}

// Resident skips tb: mincore is Linux's here.
func Resident(tb testing.TB, _ string) (in, pages int) {
	tb.Helper()
	tb.Skip("reading page cache residency needs Linux")
	return 0, 0
}
