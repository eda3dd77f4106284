package raftnode

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/workron/workron/internal/flushpace"
)

// snapshotSyncBytes is how many bytes a snapshot sink is given between
// flushes of its state file (flushpace). A var so that tests can lower it.
var snapshotSyncBytes = 4 << 20

// snapshotStore is hashicorp/raft's FileSnapshotStore, whose layout it
// keeps (snapshots/<id>/meta.json and state.bin, written in <id>.tmp and
// renamed), with a sink that flushes its state file every snapshotSyncBytes
// as it is written (flushpace), and a reader that checks a snapshot's CRC
// as it reads it once (snapread.go).
//
// Raft's sink writes the whole snapshot through a buffer and fsyncs it once
// at the end. Workron's snapshot is its state file, ~60 MB at 100k jobs, so
// that one fsync flushed all of it at once, and every small fdatasync of
// the Raft log issued meanwhile waited behind it: submit → start p99 was
// 15–80 ms against a p50 of 1.8 ms, the stalls lining up with each node's
// snapshot. On this machine's disk a loop of 4 KiB pwrite+fdatasync waited
// at most 0.6 ms alone, 32 ms beside a 64 MB write fsync'd once, and 2.4 ms
// beside the same write fsync'd every 4 MB. A follower installing the
// leader's snapshot writes through the same sink. Each step's flush is
// started as it is written and waited for one step later, so the disk
// writes one step while the sink takes the next: an fsync of each step
// made the writer wait for the disk every 4 MiB (receiving a 756 MiB
// snapshot took 9-12 s that way here; docs/performance-store.md).
type snapshotStore struct {
	*raft.FileSnapshotStore
	dir string // where FileSnapshotStore keeps the snapshots
}

func newSnapshotStore(dataDir string, retain int, logger hclog.Logger) (*snapshotStore, error) {
	fs, err := raft.NewFileSnapshotStoreWithLogger(dataDir, retain, logger)
	if err != nil {
		return nil, err
	}
	return &snapshotStore{FileSnapshotStore: fs, dir: filepath.Join(dataDir, "snapshots")}, nil
}

// Create starts a snapshot whose state file is synced as it is written.
func (s *snapshotStore) Create(version raft.SnapshotVersion, index, term uint64,
	configuration raft.Configuration, configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.FileSnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	// The sink holds its own handle of the state file, unexported; an
	// fsync through another handle of the same file flushes the same
	// pages. All but the sink's buffer (4 KiB) reach it as they are written.
	path := filepath.Join(s.dir, sink.ID()+".tmp", "state.bin")
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		sink.Cancel()
		return nil, fmt.Errorf("open snapshot state file to sync it: %w", err)
	}
	return &syncingSink{SnapshotSink: sink, state: f, pace: flushpace.New(f, snapshotSyncBytes)}, nil
}

// syncingSink flushes the state file every snapshotSyncBytes it is given,
// so that no flush of it, the last one (the sink's fsync in Close)
// included, is much larger.
type syncingSink struct {
	raft.SnapshotSink
	state *os.File
	pace  *flushpace.Pacer
}

func (s *syncingSink) Write(b []byte) (int, error) {
	n, err := s.SnapshotSink.Write(b)
	if err != nil {
		return n, err
	}
	if err := s.pace.Wrote(n); err != nil {
		return n, fmt.Errorf("snapshot state file: %w", err)
	}
	return n, nil
}

// Close finishes the snapshot (the sink syncs and renames it).
func (s *syncingSink) Close() error {
	s.state.Close()
	return s.SnapshotSink.Close()
}

// Cancel abandons the snapshot.
func (s *syncingSink) Cancel() error {
	s.state.Close()
	return s.SnapshotSink.Cancel()
}
