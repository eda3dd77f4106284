package raftnode

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"reflect"
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
	ss := sink.(*snapshotSink)
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
// written by Raft's own sink (as every node did before this sink), with its
// CRC-64, lists and reads through this store, and one written here lists
// through Raft's store with the meta.json Raft's sink writes, but for its
// checksum. An older binary refuses a snapshot written here rather than take
// it unchecked: Raft's Open (releases before snapread.go) fails on the CRC,
// and the CRC the previous release checks as it reads is null, which no
// CRC-64 equals.
func TestSnapshotStoreKeepsRaftsLayout(t *testing.T) {
	plain, ours := twoStores(t)
	old := writeSnapshot(t, plain, 5, []byte("written by raft.FileSnapshotStore"))
	metas, err := ours.List()
	if err != nil || len(metas) != 1 || metas[0].ID != old || metas[0].Index != 5 {
		t.Fatalf("List = %+v, %v; want the one snapshot %s at index 5", metas, err, old)
	}
	if got := string(readSnapshot(t, ours, old)); got != "written by raft.FileSnapshotStore" {
		t.Fatalf("read %q through this store", got)
	}

	newer := writeSnapshot(t, ours, 9, []byte("written by raftnode"))
	metas, err = plain.List()
	if err != nil || len(metas) != 2 || metas[0].ID != newer {
		t.Fatalf("Raft's List = %+v, %v; want %s first", metas, err, newer)
	}
	want := snapshotMetaOf(t, ours, old)
	got := snapshotMetaOf(t, ours, newer)
	if got.CRC != nil || len(got.CRC32C) != 4 {
		t.Fatalf("meta.json written here has CRC %x, CRC32C %x; want no CRC and a CRC-32C", got.CRC, got.CRC32C)
	}
	want.ID, want.Index, want.Size, want.CRC = got.ID, got.Index, got.Size, nil
	got.CRC32C = nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("meta.json written here:\n%+v\nRaft's sink writes:\n%+v", got, want)
	}
	if _, rc, err := plain.Open(newer); err == nil {
		rc.Close()
		t.Fatal("Raft's Open took a snapshot without a CRC-64")
	}
}

// The meta.json written here for a configuration of voters and others
// carries the Peers Raft's sink writes (only voters, as the transport
// encodes them).
func TestSnapshotStoreWritesRaftsPeers(t *testing.T) {
	plain, ours := twoStores(t)
	conf := raft.Configuration{Servers: []raft.Server{
		{ID: "a", Address: "127.0.0.1:7000", Suffrage: raft.Voter},
		{ID: "b", Address: "127.0.0.1:7001", Suffrage: raft.Nonvoter},
		{ID: "c", Address: "127.0.0.1:7002", Suffrage: raft.Voter},
	}}
	_, trans := raft.NewInmemTransport(raft.NewInmemAddr())
	var peers [2][]byte
	for i, s := range []raft.SnapshotStore{plain, ours} {
		sink, err := s.Create(raft.SnapshotVersionMax, 3, 1, conf, 2, trans)
		if err != nil {
			t.Fatal(err)
		}
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
		m := snapshotMetaOf(t, ours, sink.ID())
		if !reflect.DeepEqual(m.Configuration, conf) || m.ConfigurationIndex != 2 {
			t.Fatalf("meta.json of store %d: configuration %+v at %d", i, m.Configuration, m.ConfigurationIndex)
		}
		peers[i] = m.Peers
	}
	if len(peers[0]) == 0 || !bytes.Equal(peers[0], peers[1]) {
		t.Fatalf("Peers written here %x, by Raft's sink %x", peers[1], peers[0])
	}
}

// The sink keeps the rest of Raft's sink's contract: a cancelled snapshot
// leaves nothing, a closed one is renamed into place (no <id>.tmp left),
// and the store keeps the newest retained ones, removing the rest.
func TestSnapshotSinkCancelsRenamesAndReaps(t *testing.T) {
	snaps, err := newSnapshotStore(t.TempDir(), 2, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	_, trans := raft.NewInmemTransport(raft.NewInmemAddr())
	sink, err := snaps.Create(raft.SnapshotVersionMax, 1, 1, raft.Configuration{}, 0, trans)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write([]byte("abandoned")); err != nil {
		t.Fatal(err)
	}
	if err := sink.Cancel(); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatalf("Close after Cancel: %v", err)
	}
	var ids []string
	for i := range 3 {
		ids = append(ids, writeSnapshot(t, snaps, uint64(10+i), []byte("kept")))
	}
	entries, err := os.ReadDir(snaps.dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := ids[1:]; !reflect.DeepEqual(names, want) {
		t.Fatalf("snapshots/ holds %q, want the two newest %q", names, want)
	}
}

// twoStores is hashicorp/raft's FileSnapshotStore and this store, on one
// directory.
func twoStores(t *testing.T) (*raft.FileSnapshotStore, *snapshotStore) {
	t.Helper()
	dir := t.TempDir()
	plain, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	ours, err := newSnapshotStore(dir, 2, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	return plain, ours
}

func snapshotMetaOf(t *testing.T, s *snapshotStore, id string) *snapshotMeta {
	t.Helper()
	m, err := readSnapshotMeta(filepath.Join(s.dir, id, "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	return m
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
