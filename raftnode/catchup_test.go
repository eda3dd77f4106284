package raftnode_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workron/workron/raftnode"
)

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStartAtASnapshotOfNoOpsRestoresNothing: a snapshot taken when the
// last entries were a new leader's no-op and barriers (which never reach
// the FSM) stands at a higher index than the state file's, but holds the
// same state; a start must not restore it (a rewrite of the whole state
// file, gigabytes at millions of jobs) and must stand at its index.
func TestStartAtASnapshotOfNoOpsRestoresNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "n1")
	open := func(logs *syncBuffer) *raftnode.Node {
		t.Helper()
		cfg := loneConfig(dir)
		if logs != nil {
			cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
		}
		n, err := raftnode.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, leads(n))
		return n
	}
	n := open(nil)
	for i := range 5 {
		register(t, n, fmt.Sprintf("w%02d", i))
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	n = open(nil) // elected again: a no-op and the leadership's barrier
	// The leadership's barrier (after the election's no-op) has gone
	// through Raft's FSM goroutine once VerifyLeader returns: a snapshot
	// now covers both, and stands above the state file's index.
	if err := n.VerifyLeader(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, n.Snapshot)
	snapAt := n.Stats().LastLogIndex
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}

	var logs syncBuffer
	n = open(&logs)
	defer n.Shutdown()
	if out := logs.String(); strings.Contains(out, "restoring") || !strings.Contains(out, "state file at snapshot") {
		t.Fatalf("the start after a snapshot of no-ops logged:\n%s\nwant no restore", out)
	}
	if got := n.AppliedIndex(); got < snapAt {
		t.Errorf("AppliedIndex() = %d after the start, want at least the snapshot's %d", got, snapAt)
	}
	register(t, n, "after")
}
