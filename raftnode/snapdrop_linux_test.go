package raftnode

import (
	"bytes"
	"io"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/workron/workron/internal/testkit/pagecache"
)

// A snapshot read whole through the store's reader leaves none of its
// pages in the page cache: they would push out those the node reads next
// (the state file a restore just wrote).
// residentShare is the share of the file's pages in the page cache.
func residentShare(t *testing.T, path string) float64 {
	in, pages := pagecache.Resident(t, path)
	return float64(in) / float64(max(pages, 1))
}

func TestSnapshotReaderDropsThePagesItRead(t *testing.T) {
	old := dropBehindBytes
	dropBehindBytes = 1 << 20
	t.Cleanup(func() { dropBehindBytes = old })
	snaps, err := newSnapshotStore(t.TempDir(), 2, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MiB
	id := writeSnapshot(t, snaps, 5, data)                  // written back: the sink fsyncs it
	path := statePath(snaps, id)
	if r := residentShare(t, path); r < 0.5 {
		t.Skipf("the page cache holds %.0f%% of a file just written here (tmpfs, or memory pressure): nothing to drop", 100*r)
	}
	_, rc, err := snaps.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, err %v; want the %d written", len(got), err, len(data))
	}
	if r := residentShare(t, path); r > 0.1 {
		t.Fatalf("%.0f%% of the snapshot's pages still cached after it was read; want them dropped", 100*r)
	}
}
