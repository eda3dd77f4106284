package node_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/node"
)

// TestDiskUsage checks that a real node measures its data directory: the
// state file, the Raft log and the snapshots, in /health.
func TestDiskUsage(t *testing.T) {
	n, err := node.Start(testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	// Once leadership has recorded the node's address there is an entry
	// to snapshot.
	clustertest.WaitFor(t, 10*time.Second, n.Raft().Snapshot)
	u := n.Raft().DiskUsage()
	if u.StateBytes <= 0 || u.StateInUseBytes <= 0 || u.StateInUseBytes > u.StateBytes || u.LogBytes <= 0 || u.SnapshotBytes <= 0 {
		t.Fatalf("disk usage %+v: want every size above 0, in use at most the file", u)
	}
	resp, err := http.Get(n.URL() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h wire.Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	if h.Disk == nil || h.Disk.StateBytes <= 0 || h.Disk.LogBytes <= 0 {
		t.Fatalf("GET /health disk = %+v, want the data directory's sizes", h.Disk)
	}
}
