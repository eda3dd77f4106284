package raftnode

import (
	"bufio"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/workron/workron/internal/flushpace"
)

// snapshotSyncBytes is how many bytes a snapshot sink is given between
// flushes of its state file (flushpace). A var so that tests can lower it.
var snapshotSyncBytes = 4 << 20

// snapshotStore is hashicorp/raft's FileSnapshotStore, whose layout it
// keeps (snapshots/<id>/meta.json and state.bin, written in <id>.tmp and
// renamed) and whose List and ReapSnapshots it uses, with a sink of its own
// and a reader that checks a snapshot's checksum as it reads it once
// (snapread.go).
//
// The sink does what Raft's does (the state file through a 4 KiB buffer,
// fsync'd at the end; then meta.json, fsync'd; the rename of the directory,
// fsync'd; the snapshots past the retained ones removed) with two
// differences. It records a CRC-32C, which the CPU computes, instead of
// Raft's CRC-64, which Go computes from tables (snapmeta.go). And it flushes
// the state file every snapshotSyncBytes as it is written (flushpace).
//
// Raft's sink fsyncs the whole snapshot once at the end. Workron's snapshot
// is its state file, ~60 MB at 100k jobs, so that one fsync flushed all of
// it at once, and every small fdatasync of the Raft log issued meanwhile
// waited behind it: submit → start p99 was 15–80 ms against a p50 of
// 1.8 ms, the stalls lining up with each node's snapshot. On this machine's
// disk a loop of 4 KiB pwrite+fdatasync waited at most 0.6 ms alone, 32 ms
// beside a 64 MB write fsync'd once, and 2.4 ms beside the same write
// fsync'd every 4 MB. A follower installing the leader's snapshot writes
// through the same sink. Each step's flush is started as it is written and
// waited for one step later, so the disk writes one step while the sink
// takes the next: an fsync of each step made the writer wait for the disk
// every 4 MiB (receiving a 756 MiB snapshot took 9-12 s that way here;
// docs/performance-store.md).
type snapshotStore struct {
	*raft.FileSnapshotStore
	dir    string // where FileSnapshotStore keeps the snapshots
	logger hclog.Logger
}

func newSnapshotStore(dataDir string, retain int, logger hclog.Logger) (*snapshotStore, error) {
	fs, err := raft.NewFileSnapshotStoreWithLogger(dataDir, retain, logger)
	if err != nil {
		return nil, err
	}
	return &snapshotStore{FileSnapshotStore: fs, dir: filepath.Join(dataDir, "snapshots"), logger: logger}, nil
}

// Create starts a snapshot in <id>.tmp, which the sink's Close renames to
// <id>. The id is Raft's: term-index-milliseconds. Only version 1, as
// Raft's store.
func (s *snapshotStore) Create(version raft.SnapshotVersion, index, term uint64,
	configuration raft.Configuration, configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	if version != 1 {
		return nil, fmt.Errorf("create snapshot: unsupported snapshot version %d", version)
	}
	peers, err := encodePeers(configuration, trans)
	if err != nil {
		return nil, fmt.Errorf("create snapshot: %w", err)
	}
	id := fmt.Sprintf("%d-%d-%d", term, index, time.Now().UnixMilli())
	dir := filepath.Join(s.dir, id+".tmp")
	s.logger.Info("creating new snapshot", "path", dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create snapshot: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "state.bin"))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("create snapshot: %w", err)
	}
	return &snapshotSink{
		store: s,
		dir:   dir,
		meta: snapshotMeta{SnapshotMeta: raft.SnapshotMeta{
			Version: version, ID: id, Index: index, Term: term, Peers: peers,
			Configuration: configuration, ConfigurationIndex: configurationIndex,
		}},
		f:    f,
		w:    bufio.NewWriter(f),
		sum:  newCRC32C(),
		pace: flushpace.New(f, snapshotSyncBytes),
	}, nil
}

// snapshotSink writes a snapshot's state file, checksumming it and
// flushing it every snapshotSyncBytes it is given, so that no flush of it,
// the last one (the fsync in Close) included, is much larger.
type snapshotSink struct {
	store  *snapshotStore
	dir    string // <id>.tmp
	meta   snapshotMeta
	f      *os.File // state.bin
	w      *bufio.Writer
	sum    hash.Hash32
	pace   *flushpace.Pacer
	closed bool
}

func (s *snapshotSink) ID() string { return s.meta.ID }

func (s *snapshotSink) Write(b []byte) (int, error) {
	n, err := s.w.Write(b)
	s.sum.Write(b[:n])
	if err != nil {
		return n, fmt.Errorf("snapshot state file: %w", err)
	}
	if err := s.pace.Wrote(n); err != nil {
		return n, fmt.Errorf("snapshot state file: %w", err)
	}
	return n, nil
}

// Close finishes the snapshot: the state file fsync'd, then meta.json with
// its size and checksum, then the rename to <id>, then the snapshots past
// the retained ones removed. On an error before the rename the snapshot is
// removed. Safe to call twice.
func (s *snapshotSink) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	if err := s.finish(); err != nil {
		s.store.logger.Error("failed to finalize snapshot", "id", s.meta.ID, "error", err)
		_ = os.RemoveAll(s.dir)
		return fmt.Errorf("finish snapshot %s: %w", s.meta.ID, err)
	}
	if err := s.store.ReapSnapshots(); err != nil {
		return fmt.Errorf("finish snapshot %s: %w", s.meta.ID, err)
	}
	return nil
}

// finish makes the snapshot durable and puts it in place.
func (s *snapshotSink) finish() error {
	err := s.w.Flush()
	if err == nil {
		err = s.f.Sync()
	}
	var fi os.FileInfo
	if err == nil {
		fi, err = s.f.Stat()
	}
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	s.meta.Size = fi.Size()
	s.meta.CRC32C = s.sum.Sum(nil)
	if err := writeSnapshotMeta(filepath.Join(s.dir, "meta.json"), &s.meta); err != nil {
		return err
	}
	if err := os.Rename(s.dir, strings.TrimSuffix(s.dir, ".tmp")); err != nil {
		return err
	}
	return syncDir(s.store.dir)
}

// Cancel abandons the snapshot and removes it. Safe to call twice, and
// after Close (it does nothing then).
func (s *snapshotSink) Cancel() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.f.Close()
	return os.RemoveAll(s.dir)
}
