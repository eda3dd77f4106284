package raftnode_test

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/workron/workron/raftnode"
)

// TestSnapshotLeavesTrailingLogs: a snapshot compacts the Raft log down to
// its last Config.TrailingLogs entries (workron server --raft-trailing-logs);
// a follower needing an older entry is sent the snapshot instead.
func TestSnapshotLeavesTrailingLogs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "n1")
	cfg := loneConfig(dir)
	cfg.TrailingLogs = 5
	n, err := raftnode.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, leads(n))
	for i := range 30 {
		register(t, n, fmt.Sprintf("w%02d", i))
	}
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	last := n.Stats().LastLogIndex
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	first := firstLogIndex(t, filepath.Join(dir, "raft.db"))
	if want := last - 5 + 1; first != want {
		t.Fatalf("the log starts at index %d after a snapshot at %d, want %d (5 trailing entries)", first, last, want)
	}
}

// TestConfigIsValidated names the field out of bounds.
func TestConfigIsValidated(t *testing.T) {
	for name, mutate := range map[string]func(*raftnode.Config){
		"TrailingLogs":      func(c *raftnode.Config) { c.TrailingLogs = 0 },
		"SnapshotThreshold": func(c *raftnode.Config) { c.SnapshotThreshold = 0 },
		"SnapshotInterval":  func(c *raftnode.Config) { c.SnapshotInterval = time.Millisecond },
		"SnapshotWriteRate": func(c *raftnode.Config) { c.SnapshotWriteRate = -1 },
		"RaftLogLevel":      func(c *raftnode.Config) { c.RaftLogLevel = "loud" },
		"StateCheck":        func(c *raftnode.Config) { c.StateCheck = "sometimes" },
	} {
		cfg := loneConfig(t.TempDir())
		mutate(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: err = %v, want one naming it", name, err)
		}
	}
}

// firstLogIndex reads the oldest entry's index from a Raft log file: its
// "logs" bucket, keyed by big-endian index (raft-boltdb's layout, which
// raftnode keeps).
func firstLogIndex(t *testing.T, path string) uint64 {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var first uint64
	err = db.View(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket([]byte("logs")).Cursor().First(); k != nil {
			first = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return first
}
