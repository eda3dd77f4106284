package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// ErrInUse means a process (a running node) holds the state file's lock.
var ErrInUse = errors.New("store: the state file is in use")

// CompactTimeout is how long Compact waits for the state file's lock
// before it gives up with ErrInUse.
const CompactTimeout = time.Second

// compactTxBytes is how much Compact copies per write transaction.
const compactTxBytes = 64 << 20

// CompactResult is what Compact did: the file's size before and after.
type CompactResult struct {
	Before, After int64
}

// Compact rewrites the state file at path with only the pages its data
// needs (bbolt.Compact), giving back to the disk the free pages bbolt
// keeps after deletes. It runs offline: it takes the file's lock (bbolt's
// flock), so a running node makes it fail with ErrInUse after
// CompactTimeout, and a node started meanwhile waits for it. The copy is
// written to a temporary file beside the original, fsync'd, and renamed
// over it, so a crash leaves either file whole; the temporary file is
// removed on failure.
func Compact(path string) (CompactResult, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return CompactResult{}, fmt.Errorf("compact %s: %w", path, err)
	}
	src, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: CompactTimeout, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if errors.Is(err, berrors.ErrTimeout) {
		return CompactResult{}, fmt.Errorf("compact %s: %w: stop the node that uses this data directory first", path, ErrInUse)
	}
	if err != nil {
		return CompactResult{}, fmt.Errorf("compact %s: %w", path, err)
	}
	defer src.Close() // the lock is held until the copy is in place
	tmp := path + ".compact"
	if err := copyCompacted(tmp, src); err != nil {
		_ = os.Remove(tmp)
		return CompactResult{}, fmt.Errorf("compact %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return CompactResult{}, fmt.Errorf("compact %s: %w", path, err)
	}
	syncDir(filepath.Dir(path))
	after, err := os.Stat(path)
	if err != nil {
		return CompactResult{}, fmt.Errorf("compact %s: %w", path, err)
	}
	return CompactResult{Before: fi.Size(), After: after.Size()}, nil
}

// copyCompacted writes src's data into a new file at tmp, and fsyncs it.
func copyCompacted(tmp string, src *bolt.DB) error {
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err // left by a compaction that crashed
	}
	// The copy's freelist is written, as Store.open writes it, so that the
	// next start need not walk every page to find the free ones.
	dst, err := bolt.Open(tmp, 0o600, &bolt.Options{NoSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return err
	}
	if err := bolt.Compact(dst, src, compactTxBytes); err != nil {
		_ = dst.Close()
		return err
	}
	if err := dst.Sync(); err != nil {
		_ = dst.Close()
		return err
	}
	return dst.Close()
}

// syncDir fsyncs a directory so that a rename in it lasts.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
