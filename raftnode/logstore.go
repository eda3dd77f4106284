package raftnode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// boltLogStore is the Raft log and stable store, in raft.db. Its layout is
// hashicorp/raft-boltdb/v2's, which Workron used until it moved to
// hashicorp/raft v1.8 (raft-boltdb v2.3.1 imports go-metrics' compat
// package, which the go-metrics v0.7.0 that raft v1.8 requires removed, so
// the two no longer build together): a bbolt file with a "logs" bucket of
// entries keyed by their index (8 bytes, big-endian), msgpack-encoded as
// raft-boltdb encoded them, and a "conf" bucket for the stable store's
// keys (the current term, the last vote). A data directory written by
// either reads with the other (TestUpgradeReadsTheOldDataDirectory).
type boltLogStore struct {
	db *bolt.DB
}

var (
	logsBucket = []byte("logs")
	confBucket = []byte("conf")

	// errKeyNotFound is the stable store's answer for a key never set.
	// hashicorp/raft tells it apart by its text, "not found".
	errKeyNotFound = errors.New("not found")

	// Entries are encoded as raft-boltdb encoded them: time.Time (an
	// entry's AppendedAt) in go-msgpack v0.5.5's format, which every
	// go-msgpack v2 decoder reads, as it reads the newer one.
	encodeHandle = func() *codec.MsgpackHandle {
		h := &codec.MsgpackHandle{}
		h.TimeNotBuiltin = true
		return h
	}()
	decodeHandle = &codec.MsgpackHandle{}
)

var (
	_ raft.LogStore    = (*boltLogStore)(nil)
	_ raft.StableStore = (*boltLogStore)(nil)
)

// openLogStore opens (or creates) the store at path. Every write is one
// bbolt transaction, fsync'd before it returns.
func openLogStore(path string) (*boltLogStore, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{logsBucket, confBucket} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &boltLogStore{db: db}, nil
}

// Close closes the file.
func (s *boltLogStore) Close() error { return s.db.Close() }

// FirstIndex is the index of the oldest entry, 0 if there is none.
func (s *boltLogStore) FirstIndex() (uint64, error) {
	return s.edgeIndex(func(c *bolt.Cursor) []byte { k, _ := c.First(); return k })
}

// LastIndex is the index of the newest entry, 0 if there is none.
func (s *boltLogStore) LastIndex() (uint64, error) {
	return s.edgeIndex(func(c *bolt.Cursor) []byte { k, _ := c.Last(); return k })
}

func (s *boltLogStore) edgeIndex(edge func(*bolt.Cursor) []byte) (uint64, error) {
	var idx uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if k := edge(tx.Bucket(logsBucket).Cursor()); k != nil {
			idx = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return idx, err
}

// GetLog reads the entry at index into out, or returns raft.ErrLogNotFound.
func (s *boltLogStore) GetLog(index uint64, out *raft.Log) error {
	return s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(logsBucket).Get(indexKey(index))
		if v == nil {
			return raft.ErrLogNotFound
		}
		// A reader, not the bytes: the value lives only as long as the
		// transaction, and decoding from a reader copies Data out of it.
		if err := codec.NewDecoder(bytes.NewReader(v), decodeHandle).Decode(out); err != nil {
			return fmt.Errorf("decode log entry %d: %w", index, err)
		}
		return nil
	})
}

// StoreLog stores one entry.
func (s *boltLogStore) StoreLog(l *raft.Log) error {
	return s.StoreLogs([]*raft.Log{l})
}

// StoreLogs stores entries in one transaction; they are encoded before it
// begins, so the file's write lock is held only to put them.
func (s *boltLogStore) StoreLogs(logs []*raft.Log) error {
	vals := make([][]byte, len(logs))
	for i, l := range logs {
		var buf bytes.Buffer
		if err := codec.NewEncoder(&buf, encodeHandle).Encode(l); err != nil {
			return fmt.Errorf("encode log entry %d: %w", l.Index, err)
		}
		vals[i] = buf.Bytes()
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(logsBucket)
		for i, l := range logs {
			if err := b.Put(indexKey(l.Index), vals[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteRange deletes the entries from min to max, both included.
func (s *boltLogStore) DeleteRange(min, max uint64) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		// Seek again after each delete rather than step on: a cursor's
		// Next after its Delete can skip a key.
		c, from := tx.Bucket(logsBucket).Cursor(), indexKey(min)
		for k, _ := c.Seek(from); k != nil && binary.BigEndian.Uint64(k) <= max; k, _ = c.Seek(from) {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
}

// Set stores a stable-store key.
func (s *boltLogStore) Set(k, v []byte) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(confBucket).Put(k, v)
	})
}

// Get reads a stable-store key, or returns errKeyNotFound.
func (s *boltLogStore) Get(k []byte) ([]byte, error) {
	var v []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		if got := tx.Bucket(confBucket).Get(k); got != nil {
			v = append([]byte(nil), got...)
		}
		return nil
	})
	if err == nil && v == nil {
		err = errKeyNotFound
	}
	return v, err
}

// SetUint64 stores a stable-store key holding a number.
func (s *boltLogStore) SetUint64(k []byte, v uint64) error {
	return s.Set(k, indexKey(v))
}

// GetUint64 reads a stable-store key holding a number, or returns
// errKeyNotFound.
func (s *boltLogStore) GetUint64(k []byte) (uint64, error) {
	v, err := s.Get(k)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("stable store key %q holds %d bytes, not a uint64", k, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

func indexKey(i uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), i)
}
