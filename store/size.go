package store

import (
	"fmt"
	"os"

	bolt "go.etcd.io/bbolt"
)

// Size is how large the state file is and how much of it holds data.
// bbolt never shrinks its file: pages that deletes free are reused by
// later writes, and only a compaction (Compact) gives them back to the
// disk.
type Size struct {
	// FileBytes is the file's size on disk.
	FileBytes int64
	// CopyBytes is the pages bbolt has allocated, its high-water mark:
	// what a snapshot or a backup copies.
	CopyBytes int64
	// InUseBytes is what the file's pages hold: its high-water mark less
	// the pages on bbolt's freelist (free, or pending release once no
	// reader needs them).
	InUseBytes int64
}

// FreeBytes is what a compaction would give back at most: the file less
// what is in use.
func (s Size) FreeBytes() int64 { return max(s.FileBytes-s.InUseBytes, 0) }

// Size reads the state file's size and bbolt's free page count.
func (s *Store) Size() (Size, error) {
	if s.db == nil {
		return Size{}, ErrClosed
	}
	fi, err := os.Stat(s.path)
	if err != nil {
		return Size{}, fmt.Errorf("state size: %w", err)
	}
	var high int64
	if err := s.db.View(func(tx *bolt.Tx) error { high = tx.Size(); return nil }); err != nil {
		return Size{}, fmt.Errorf("state size: %w", err)
	}
	st := s.db.Stats()
	free := int64(st.FreePageN+st.PendingPageN) * int64(s.db.Info().PageSize)
	return Size{FileBytes: fi.Size(), CopyBytes: high, InUseBytes: max(high-free, 0)}, nil
}
