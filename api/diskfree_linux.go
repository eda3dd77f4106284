package api

import "syscall"

// diskFree returns the bytes free to an unprivileged user on the disk that
// holds dir, and whether it could tell.
func diskFree(dir string) (uint64, bool) {
	free, _, ok := diskSpace(dir)
	return free, ok
}

// diskSpace returns the bytes free to an unprivileged user on the disk
// that holds dir, the disk's size, and whether it could tell.
func diskSpace(dir string) (free, size uint64, ok bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, false
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), true
}
