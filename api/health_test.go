package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/node"
)

// TestHealthReadiness checks GET /health?ready=1: 200 once a node has
// applied what the leader has committed, 503 catching_up (with the lag)
// while it has not. A follower restarted while the cluster moved on is held
// behind by a slow Raft log (every write takes seconds) so the check sees
// it behind; meanwhile plain /health already says ok.
func TestHealthReadiness(t *testing.T) {
	if testing.Short() {
		t.Skip("holds a follower behind with 3 s Raft log writes")
	}
	var slowNode atomic.Int64 // index+1 of the node whose next start gets a slow log
	slowNode.Store(-1)
	const slowWrite = 3 * time.Second
	c := clustertest.New(t, 3, clustertest.WithConfig(func(i int, nc *node.Config) {
		if int64(i+1) == slowNode.Load() {
			nc.Raft.FsyncDelay = slowWrite
		}
	}))
	hc := httpClient(t)
	leader := c.Leader(t)

	t.Run("EveryNodeIsReadyWhenCaughtUp", func(t *testing.T) {
		for i := range c.Len() {
			h := decodeJSON[wire.Health](t, doHTTP(t, hc, http.StatusOK, "GET", c.URL(i)+"/health?ready=1", nil))
			if h.Status != "ok" || h.Lag == nil || *h.Lag != 0 || h.LeaderCommitIndex == 0 || h.AppliedIndex < h.LeaderCommitIndex {
				t.Errorf("%s: %+v", c.Node(i).ID(), h)
			}
		}
	})

	t.Run("ARestartedFollowerIsNotReadyUntilItCatchesUp", func(t *testing.T) {
		f := c.Followers(t)[0]
		c.Kill(t, f)
		for range 20 {
			doHTTP(t, hc, http.StatusCreated, "POST", c.URL(leader)+"/jobs", wire.SubmitRequest{Command: "true"})
		}
		slowNode.Store(int64(f + 1))
		c.Restart(t, f)
		var behind wire.Health
		clustertest.WaitFor(t, 20*time.Second, func() error {
			status, h := getHealth(t, hc, c.URL(f)+"/health?ready=1")
			switch {
			case h.Status == "no_leader":
				return fmt.Errorf("%s knows no leader yet (%s)", c.Node(f).ID(), h.Error)
			case status != http.StatusServiceUnavailable || h.Status != "catching_up":
				t.Fatalf("%s answered HTTP %d %+v before it had the entries it missed", c.Node(f).ID(), status, h)
			}
			behind = h
			return nil
		})
		if behind.Lag == nil || *behind.Lag == 0 || behind.AppliedIndex+*behind.Lag != behind.LeaderCommitIndex {
			t.Errorf("catching_up answer: %+v", behind)
		}
		t.Logf("while behind: status %s, applied %d, leader's commit %d, lag %d, own commit index %d",
			behind.Status, behind.AppliedIndex, behind.LeaderCommitIndex, *behind.Lag, behind.CommitIndex)
		if status, h := getHealth(t, hc, c.URL(f)+"/health"); status != http.StatusOK || h.Status != "ok" {
			t.Errorf("plain /health while behind: HTTP %d %+v", status, h)
		}
		clustertest.WaitFor(t, 30*time.Second, func() error {
			status, h := getHealth(t, hc, c.URL(f)+"/health?ready=1")
			if status != http.StatusOK {
				return fmt.Errorf("HTTP %d %+v", status, h)
			}
			return nil
		})
	})
}

// getHealth GETs a /health URL and decodes its body whatever the status.
func getHealth(t *testing.T, hc *http.Client, url string) (int, wire.Health) {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	var h wire.Health
	if err := json.Unmarshal(body, &h); err != nil {
		t.Fatalf("GET %s: HTTP %d %s: %v", url, resp.StatusCode, body, err)
	}
	return resp.StatusCode, h
}
