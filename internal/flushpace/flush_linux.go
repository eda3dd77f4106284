package flushpace

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// flush starts the write-back of [started, written) and waits for that of
// [waited, started). A file system without sync_file_range is fsync'd.
func flush(f *os.File, waited, started, written int64) error {
	fd := int(f.Fd())
	err := unix.SyncFileRange(fd, started, written-started, unix.SYNC_FILE_RANGE_WRITE)
	if err == nil && started > waited {
		err = unix.SyncFileRange(fd, waited, started-waited,
			unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
	}
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ESPIPE) {
		return f.Sync()
	}
	return err
}
