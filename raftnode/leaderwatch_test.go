package raftnode_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/workron/workron/raftnode"
)

// LeaderChanged closes when the node learns of a leader (here: wins its
// own election) and when it shuts down.
func TestLeaderChanged(t *testing.T) {
	cfg := loneConfig(filepath.Join(t.TempDir(), "n1"))
	cfg.HeartbeatTimeout, cfg.ElectionTimeout = time.Second, time.Second // the election comes after the call below
	n, err := raftnode.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	changed := n.LeaderChanged()
	if id, _ := n.Leader(); id != "" {
		t.Skipf("the node already knows leader %q: too late to watch the change", id)
	}
	select {
	case <-changed:
	case <-time.After(20 * time.Second):
		t.Fatal("LeaderChanged did not close when the node was elected")
	}
	waitFor(t, 10*time.Second, leads(n))

	changed = n.LeaderChanged()
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("LeaderChanged is still open after Shutdown")
	}
}
