package api

import "syscall"

// diskFree returns the bytes free to an unprivileged user on the disk that
// holds dir, and whether it could tell.
func diskFree(dir string) (uint64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return st.Bavail * uint64(st.Bsize), true
}
