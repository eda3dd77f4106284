package clustertest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/worker"
)

// TestSeriesSameOnEveryNode: GET /stats/series read from each node's own
// state (?stale=1) gives the same series on every node at one applied
// index, and after the leader is killed the nodes left give the series
// they gave before: the charts come from the replicated job records.
func TestSeriesSameOnEveryNode(t *testing.T) {
	c := newCluster(t, 3)
	began := time.Now().UTC()
	lead := c.URL(c.Leader(t))
	var ids []string
	for i := range 9 {
		req := wire.SubmitRequest{Type: "ok", Queue: "mail", MaxAttempts: ptr(1)}
		if i%3 == 2 {
			req.Type, req.Queue = "bad", "video"
		}
		ids = append(ids, submit(t, lead, req).ID)
	}
	startWorker(t, c, "charts", func(cfg *worker.Config) {
		cfg.Shell = false
		cfg.Queues = []string{"mail", "video"}
	}, map[string]worker.HandlerFunc{
		"ok":  func(context.Context, *worker.Job) error { return nil },
		"bad": func(context.Context, *worker.Job) error { return errors.New("boom") },
	})
	for _, id := range ids {
		waitJob(t, lead, id, 20*time.Second, statusIs(wire.StatusDone, wire.StatusFailed))
	}
	q := url.Values{"stale": {"1"}, "from": {began.Add(-time.Minute).Format(time.RFC3339Nano)}, "to": {time.Now().UTC().Format(time.RFC3339Nano)}}
	read := func(i int) wire.Series {
		return decode[wire.Series](t, call(t, http.StatusOK, http.MethodGet, c.URL(i)+"/stats/series?"+q.Encode(), nil))
	}
	// same reads every running node until they answer at one applied index.
	same := func(nodes []int) wire.Series {
		var first wire.Series
		clustertest.WaitFor(t, 10*time.Second, func() error {
			first = read(nodes[0])
			for _, i := range nodes[1:] {
				s := read(i)
				if s.AppliedIndex != first.AppliedIndex {
					return fmt.Errorf("node %d at %d, node %d at %d", nodes[0], first.AppliedIndex, i, s.AppliedIndex)
				}
				if !reflect.DeepEqual(s, first) {
					t.Fatalf("at applied index %d node %d gives\n%+v\nnode %d\n%+v", s.AppliedIndex, nodes[0], first, i, s)
				}
			}
			return nil
		})
		return first
	}
	sum := func(xs []int) (n int) {
		for _, x := range xs {
			n += x
		}
		return n
	}
	before := same([]int{0, 1, 2})
	if d, f, s := sum(before.Total.Done), sum(before.Total.Failed), sum(before.Total.Submitted); d != 6 || f != 3 || s != 9 || before.Partial {
		t.Fatalf("done %d failed %d submitted %d (partial %v), want 6, 3, 9", d, f, s, before.Partial)
	}
	if len(before.Queues) != 2 || sum(before.Queues[0].Done) != 6 || sum(before.Queues[1].Failed) != 3 {
		t.Fatalf("queues %+v", before.Queues)
	}

	old := c.Leader(t)
	c.Kill(t, old)
	left := c.Followers(t)
	left = append(left, c.Leader(t))
	after := same(left)
	after.AppliedIndex = before.AppliedIndex
	if !reflect.DeepEqual(after.Total, before.Total) || !reflect.DeepEqual(after.Queues, before.Queues) {
		t.Errorf("after the leader's kill\n%+v\nbefore\n%+v", after, before)
	}
}
