package raftnode

import (
	"bytes"
	"io"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// The sink syncs the state file every snapshotSyncBytes while it is
// written, not only once at the end, and the snapshot reads back whole.
func TestSnapshotStoreSyncsAsItWrites(t *testing.T) {
	defer func(n int) { snapshotSyncBytes = n }(snapshotSyncBytes)
	snapshotSyncBytes = 1024

	snaps, err := newSnapshotStore(t.TempDir(), 2, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	_, trans := raft.NewInmemTransport(raft.NewInmemAddr())
	sink, err := snaps.Create(raft.SnapshotVersionMax, 10, 3, raft.Configuration{}, 0, trans)
	if err != nil {
		t.Fatal(err)
	}
	ss := sink.(*syncingSink)
	// Ten writes of 600 bytes: syncs after the 2nd, 4th, 6th, 8th and 10th.
	want := bytes.Repeat([]byte("0123456789"), 600)
	for i := range 10 {
		if _, err := sink.Write(want[i*600 : (i+1)*600]); err != nil {
			t.Fatal(err)
		}
		if got := ss.pace.Flushes(); got != (i+1)/2 {
			t.Fatalf("after write %d: %d syncs, want %d", i+1, got, (i+1)/2)
		}
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readSnapshot(t, snaps, sink.ID()); !bytes.Equal(got, want) {
		t.Fatalf("snapshot holds %d bytes, not the %d written", len(got), len(want))
	}
}

// The store keeps hashicorp/raft's FileSnapshotStore layout: a snapshot
// written by Raft's own store (as every node did before this store) lists
// and reads through this one, and one written here through Raft's.
func TestSnapshotStoreKeepsRaftsLayout(t *testing.T) {
	dir := t.TempDir()
	plain, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	ours, err := newSnapshotStore(dir, 2, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	old := writeSnapshot(t, plain, 5, []byte("written by raft.FileSnapshotStore"))
	metas, err := ours.List()
	if err != nil || len(metas) != 1 || metas[0].ID != old || metas[0].Index != 5 {
		t.Fatalf("List = %+v, %v; want the one snapshot %s at index 5", metas, err, old)
	}
	if got := string(readSnapshot(t, ours, old)); got != "written by raft.FileSnapshotStore" {
		t.Fatalf("read %q through this store", got)
	}
	newer := writeSnapshot(t, ours, 9, []byte("written by raftnode"))
	if got := string(readSnapshot(t, plain, newer)); got != "written by raftnode" {
		t.Fatalf("read %q through raft.FileSnapshotStore", got)
	}
}

func readSnapshot(t *testing.T, s raft.SnapshotStore, id string) []byte {
	t.Helper()
	_, rc, err := s.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
