//go:build !linux

package store

import "os"

// willNeed does nothing: posix_fadvise is Linux's here.
func willNeed(*os.File, int64, int64) error { return nil }

// cached says true: with nothing to read ahead with, ReadAheadStart does
// nothing.
func cached(*os.File, int64, int) bool { return true }
