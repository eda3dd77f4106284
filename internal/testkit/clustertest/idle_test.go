package clustertest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/worker"
)

// TestIdleClusterAppendsNothing: workers waiting for work long-poll without
// writing to the log, so an idle cluster's applied index stands still.
func TestIdleClusterAppendsNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("watches an idle cluster for 3 seconds")
	}
	c := newCluster(t, 3)
	for i := range 2 {
		startWorker(t, c, fmt.Sprintf("idle-worker-%d", i), func(cfg *worker.Config) { cfg.PollWait = time.Second }, nil)
	}
	// Registration is a command; wait for both workers, then for the log
	// to settle.
	clustertest.WaitFor(t, 5*time.Second, func() error {
		list := decode[wire.WorkerList](t, call(t, http.StatusOK, http.MethodGet, c.URL(0)+"/workers", nil))
		if len(list.Workers) != 2 {
			return fmt.Errorf("%d workers registered", len(list.Workers))
		}
		return nil
	})

	// An election appends entries of its own (and the new leader records
	// its address), and short Raft timeouts under -race on a small machine
	// do cost an election now and then. Such a window proves nothing
	// either way, so it is watched again, up to three times.
	for try := 1; ; try++ {
		before, term := c.Converged(t, 5*time.Second), currentTerm(c)
		polls := idlePolls(t, c, 3*time.Second)
		if now := currentTerm(c); now != term {
			if try < 3 {
				t.Logf("window %d: Raft term moved from %d to %d (an election); watching again", try, term, now)
				continue
			}
			t.Fatalf("an election in each of %d windows; cannot tell whether idling appends", try)
		}
		for k, n := range polls {
			if n < 2 {
				t.Errorf("poller %d finished only %d long-polls; each should wait about 1s", k, n)
			}
		}
		for i := range c.Len() {
			if got := c.Applied(i); got != before {
				t.Errorf("n%d applied index moved from %d to %d while the cluster was idle", i+1, before, got)
			}
		}
		return
	}
}

func currentTerm(c *clustertest.Cluster) uint64 {
	var term uint64
	for i := range c.Len() {
		term = max(term, c.Node(i).Raft().Stats().Term)
	}
	return term
}

// idlePolls long-polls for work on every node, as raw claims (wait=1s) and
// as v0 /jobs/next calls, for d, and returns how many polls each poller
// finished.
func idlePolls(t *testing.T, c *clustertest.Cluster, d time.Duration) []int {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	polls := make([]int, 2*c.Len())
	for k := range polls {
		url := c.URL(k % c.Len()) // leader and followers alike
		wg.Go(func() {
			for ctx.Err() == nil {
				var (
					r   reply
					err error
				)
				if k < c.Len() {
					r, err = try(http.MethodPost, url+"/jobs/claim", wire.ClaimRequest{WorkerID: fmt.Sprintf("raw-%d", k), Wait: "1s"})
				} else {
					r, err = try(http.MethodGet, url+fmt.Sprintf("/jobs/next?worker_id=seed-%d&wait=1s", k), nil)
				}
				switch {
				case err != nil:
					t.Errorf("idle poll %d: %v", k, err)
					return
				case r.Status == http.StatusServiceUnavailable:
					// An election; the caller watches for those.
					time.Sleep(20 * time.Millisecond)
					continue
				case r.Status != http.StatusOK && r.Status != http.StatusNoContent:
					t.Errorf("idle poll %d: %s", k, r)
					return
				case r.Status == http.StatusOK && k < c.Len():
					var got wire.ClaimResponse
					if err := json.Unmarshal(r.Body, &got); err != nil || len(got.Jobs) != 0 {
						t.Errorf("idle claim did not return an empty claim: %s", r)
					}
				case r.Status == http.StatusOK:
					t.Errorf("idle /jobs/next returned a job: %s", r)
				}
				polls[k]++
			}
		})
	}
	wg.Wait()
	return polls
}
