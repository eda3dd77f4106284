package clustertest_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/node"
)

// withHeldJoiner builds a cluster of n nodes, then joins one more that
// cannot write its Raft log (so it cannot catch up, as one installing a
// large snapshot) until release is called; release also runs at cleanup,
// before the cluster shuts down (cleanups run last first). It returns the
// joiner's id.
func withHeldJoiner(t *testing.T, n int) (c *clustertest.Cluster, id string, release func()) {
	t.Helper()
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	c = clustertest.New(t, n, clustertest.WithConfig(func(i int, nc *node.Config) {
		if i == n {
			nc.Raft.BeforeLogWrite = func() { <-gate }
		}
	}))
	t.Cleanup(release)
	return c, c.Node(c.Join(t)).ID(), release
}

// suffrage is how node i's configuration, read on node at, lists node id:
// "voter", "nonvoter" or "" when absent.
func suffrage(t *testing.T, c *clustertest.Cluster, at int, id string) string {
	t.Helper()
	servers, err := c.Node(at).Raft().Servers()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		if s.ID == id && s.Voter {
			return "voter"
		} else if s.ID == id {
			return "nonvoter"
		}
	}
	return ""
}

// waitSuffrage waits until node at lists id with the suffrage want.
func waitSuffrage(t *testing.T, c *clustertest.Cluster, at int, id, want string) {
	t.Helper()
	clustertest.WaitFor(t, clustertest.FormTimeout, func() error {
		if got := suffrage(t, c, at, id); got != want {
			return fmt.Errorf("%s lists %s as %q, want %q", c.Node(at).ID(), id, got, want)
		}
		return nil
	})
}

// TestJoinKeepsAOneNodeClusterLeading grows a one-node cluster to two with
// a joiner that cannot write its log (as one installing a large snapshot):
// it joins as a non-voter, so the first node still makes a majority alone
// and keeps taking submits; once the joiner catches up it becomes a voter.
// Added as a voter at once (as before), the joiner would be needed for
// every commit and the submit would fail.
func TestJoinKeepsAOneNodeClusterLeading(t *testing.T) {
	c, id, release := withHeldJoiner(t, 1)
	clustertest.WaitFor(t, clustertest.FormTimeout, func() error {
		if suffrage(t, c, 0, id) == "" {
			return fmt.Errorf("n1 does not list %s yet", id)
		}
		return nil
	})

	r := send(t, http.MethodPost, c.URL(0)+"/jobs", wire.SubmitRequest{Command: "true"})
	if r.Status != http.StatusCreated {
		t.Fatalf("submit while the joiner catches up: %s", r)
	}
	if !c.Node(0).Raft().IsLeader() {
		t.Fatal("n1 lost leadership while the joiner caught up")
	}
	// It cannot have caught up: its progress is unknown or behind.
	time.Sleep(time.Second)
	if got := suffrage(t, c, 0, id); got != "nonvoter" {
		t.Fatalf("the joiner is %q before it could catch up, want nonvoter", got)
	}

	release()
	c.WaitFormed(t, clustertest.FormTimeout)
	c.Converged(t, clustertest.FormTimeout)
}

// TestPromotionSurvivesALeaderChange kills the leader while a joined
// non-voter waits to catch up: the next leader finds it and makes it a
// voter once it has.
func TestPromotionSurvivesALeaderChange(t *testing.T) {
	c, id, release := withHeldJoiner(t, 3)
	old := leaderOf(t, c, 3)
	waitSuffrage(t, c, old, id, "nonvoter")

	c.Kill(t, old)
	next := leaderOf(t, c, 3)
	if next == old {
		t.Fatalf("leader %d again", next)
	}
	if got := suffrage(t, c, next, id); got != "nonvoter" {
		t.Fatalf("the new leader lists the joiner as %q before it caught up, want nonvoter", got)
	}
	release()
	waitSuffrage(t, c, next, id, "voter")
	c.Restart(t, old)
	c.WaitFormed(t, clustertest.FormTimeout)
}

// leaderOf waits for one of the first n nodes to lead and returns it (the
// held joiner knows no leader's address, which Cluster.Leader wants).
func leaderOf(t *testing.T, c *clustertest.Cluster, n int) int {
	t.Helper()
	leader := -1
	clustertest.WaitFor(t, clustertest.FormTimeout, func() error {
		for i := range n {
			if c.Node(i).Running() && c.Node(i).Raft().IsLeader() {
				leader = i
				return nil
			}
		}
		return fmt.Errorf("none of the first %d nodes leads", n)
	})
	return leader
}
