//go:build !linux

package api

// diskFree cannot tell the free space on this system: a restore is then
// refused only when a write to the disk fails.
func diskFree(string) (uint64, bool) { return 0, false }

// diskSpace cannot tell either: the disk is then never reported low.
func diskSpace(string) (free, size uint64, ok bool) { return 0, 0, false }
