//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package clustertest_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/node"
)

// TestBulkAcrossLeaderChange cancels 3,000 jobs of a queue and then
// retries them with bulk actions whose steps name 5 jobs each, killing
// the leader while the retry is under way: the new leader resumes it
// where the log says, and every job is retried exactly once (matched and
// done 3,000, none skipped or failed, every job pending again), alike on
// every node. Jobs of another queue are untouched.
func TestBulkAcrossLeaderChange(t *testing.T) {
	if testing.Short() {
		t.Skip("3,000 jobs in steps of 5")
	}
	const n = 3000
	c := newCluster(t, 3, clustertest.WithConfig(func(_ int, nc *node.Config) { nc.Leader.Bulker.Chunk = 5 }))
	lead := c.Leader(t)
	url := c.URL(lead)
	for range n / 1000 {
		var batch wire.BatchSubmitRequest
		for range 1000 {
			batch.Jobs = append(batch.Jobs, wire.SubmitRequest{Command: "true", Queue: "emails"})
		}
		call(t, http.StatusCreated, http.MethodPost, url+"/jobs/batch", batch)
	}
	other := submit(t, url, wire.SubmitRequest{Command: "true", Queue: "other"})

	cancel := decode[wire.Bulk](t, call(t, http.StatusCreated, http.MethodPost, url+"/bulk", wire.BulkRequest{Action: wire.BulkCancel, Queue: "emails"}))
	done := waitBulk(t, url, cancel.ID, wire.BulkDone)
	if done.Matched != n || done.Done != n {
		t.Fatalf("bulk cancel ended %+v, want %d matched and done", done, n)
	}
	count := decode[wire.BulkCount](t, call(t, http.StatusOK, http.MethodPost, url+"/bulk",
		wire.BulkRequest{Action: wire.BulkRetry, Status: wire.StatusCancelled, Queue: "emails", DryRun: true}))
	if count.Matched != n || !count.Exact {
		t.Fatalf("dry run counted %+v, want %d exact", count, n)
	}

	retry := decode[wire.Bulk](t, call(t, http.StatusCreated, http.MethodPost, url+"/bulk",
		wire.BulkRequest{Action: wire.BulkRetry, Status: wire.StatusCancelled, Queue: "emails"}))
	clustertest.WaitFor(t, 30*time.Second, func() error {
		if b := getBulk(t, url, retry.ID); b.Matched == 0 {
			return fmt.Errorf("bulk retry not started: %+v", b)
		}
		return nil
	})
	c.Kill(t, lead)
	url = c.URL(c.Leader(t))
	if b := getBulk(t, url, retry.ID); b.State == wire.BulkDone {
		t.Logf("the retry was done before the leader died (%+v): the resumption went untested this run", b)
	}
	got := waitBulk(t, url, retry.ID, wire.BulkDone)
	if got.Matched != n || got.Done != n || got.Skipped != 0 || got.Failed != 0 {
		t.Errorf("bulk retry across a leader change ended %+v, want %d matched and done, none skipped or failed", got, n)
	}
	pending := decode[wire.BulkCount](t, call(t, http.StatusOK, http.MethodPost, url+"/bulk",
		wire.BulkRequest{Action: wire.BulkCancel, Status: wire.StatusPending, Queue: "emails", DryRun: true}))
	if pending.Matched != n {
		t.Errorf("%d jobs pending again after the retry, want %d", pending.Matched, n)
	}
	if j := getJob(t, url, other.ID); j.Status != wire.StatusPending {
		t.Errorf("job of another queue: %s, want pending", j.Status)
	}
	c.Converged(t, 30*time.Second)
}

// TestBulkStopAndBadInput: a stop halts an action between two steps and
// is kept; bad requests get 400 naming the field and start nothing; an
// unknown id is 404.
func TestBulkStopAndBadInput(t *testing.T) {
	c := newCluster(t, 1, clustertest.WithConfig(func(_ int, nc *node.Config) {
		nc.Leader.Bulker.Chunk, nc.Leader.Bulker.Interval = 1, time.Hour
	}))
	url := c.URL(c.Leader(t))
	for range 3 {
		submit(t, url, wire.SubmitRequest{Command: "true", Queue: "q"})
	}
	prio := 7
	for _, tc := range []struct {
		field string
		req   any
	}{
		{"action", wire.BulkRequest{Action: "erase", Queue: "q"}},
		{"status", wire.BulkRequest{Action: wire.BulkCancel}},
		{"status", wire.BulkRequest{Action: wire.BulkCancel, Status: "lost"}},
		{"priority", wire.BulkRequest{Action: wire.BulkPriority, Queue: "q"}},
		{"priority", wire.BulkRequest{Action: wire.BulkRetry, Queue: "q", Priority: &prio}},
		{"metadata", wire.BulkRequest{Action: wire.BulkCancel, Metadata: map[string]string{"": "x"}}},
	} {
		r := call(t, http.StatusBadRequest, http.MethodPost, url+"/bulk", tc.req)
		if e := decode[wire.Error](t, r); e.Code != wire.CodeInvalid || !strings.HasPrefix(e.Error, tc.field) {
			t.Errorf("%+v: %s, want invalid naming %s", tc.req, r, tc.field)
		}
	}
	if l := decode[wire.BulkList](t, call(t, http.StatusOK, http.MethodGet, url+"/bulk", nil)); len(l.Bulks) != 0 {
		t.Errorf("bad requests started %d bulk actions", len(l.Bulks))
	}
	call(t, http.StatusNotFound, http.MethodGet, url+"/bulk/99", nil)
	call(t, http.StatusNotFound, http.MethodPost, url+"/bulk/x/stop", nil)

	// The loop's first pass is over: the action waits for the next, an
	// hour away, and the stop comes first.
	b := decode[wire.Bulk](t, call(t, http.StatusCreated, http.MethodPost, url+"/bulk", wire.BulkRequest{Action: wire.BulkPriority, Queue: "q", Priority: &prio}))
	stopped := decode[wire.Bulk](t, call(t, http.StatusOK, http.MethodPost, url+"/bulk/"+b.ID+"/stop", nil))
	if stopped.State != wire.BulkStopped || stopped.Done != 0 {
		t.Errorf("after stop: %+v, want stopped with nothing done", stopped)
	}
	if l := decode[wire.BulkList](t, call(t, http.StatusOK, http.MethodGet, url+"/bulk", nil)); len(l.Bulks) != 1 || l.Bulks[0].State != wire.BulkStopped {
		t.Errorf("GET /bulk: %+v, want the one stopped action", l)
	}
}

func getBulk(tb testing.TB, url, id string) wire.Bulk {
	tb.Helper()
	return decode[wire.Bulk](tb, call(tb, http.StatusOK, http.MethodGet, url+"/bulk/"+id, nil))
}

func waitBulk(tb testing.TB, url, id, state string) wire.Bulk {
	tb.Helper()
	var b wire.Bulk
	// A bound, not a speed check: 600 steps of 5 jobs took over a minute
	// under the race detector at load 15.
	clustertest.WaitFor(tb, 3*time.Minute, func() error {
		if b = getBulk(tb, url, id); b.State != state {
			return fmt.Errorf("bulk %s: %+v, want %s", id, b, state)
		}
		return nil
	})
	return b
}
