package clustertest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/worker"
)

// TestLostClaimReplyCostsNoAttempt: a claim committed by the cluster whose
// reply never reached the worker (here a proxy answers 502 in its place, as
// a node does when the leader dies) does not use up the job's one attempt:
// the worker's next heartbeat gives it back and the job runs (issue #15,
// part 3). Before, the attempt expired after the lease TTL and the job
// failed without ever running.
func TestLostClaimReplyCostsNoAttempt(t *testing.T) {
	c := newCluster(t, 1, clustertest.WithLeaseTTL(10*time.Second))
	target, err := url.Parse(c.URL(0))
	if err != nil {
		t.Fatal(err)
	}
	var lose, lost atomic.Int32
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.URL.Path != "/jobs/claim" || resp.StatusCode != http.StatusOK {
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		var cr wire.ClaimResponse
		if json.Unmarshal(body, &cr) == nil && len(cr.Jobs) > 0 && lose.CompareAndSwap(1, 0) {
			lost.Add(1)
			resp.StatusCode = http.StatusBadGateway
			body = []byte(`{"error":"the leader went away","code":"outcome_unknown"}`)
			resp.Header.Set("Content-Type", "application/json")
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Del("Content-Length")
		return nil
	}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)

	startWorker(t, c, "lost-reply-worker", func(cfg *worker.Config) {
		cfg.Servers = []string{front.URL}
		cfg.PollWait = 200 * time.Millisecond
	}, nil)
	// A first job teaches the worker the lease TTL.
	first := submit(t, c.URL(0), map[string]any{"command": "true"})
	waitJob(t, c.URL(0), first.ID, 20*time.Second, statusIs(wire.StatusDone))

	lose.Store(1)
	j := submit(t, c.URL(0), map[string]any{"command": "true", "max_attempts": 1})
	got := waitJob(t, c.URL(0), j.ID, 30*time.Second, statusIs(wire.StatusDone, wire.StatusFailed))
	if lost.Load() != 1 {
		t.Fatalf("%d claim replies lost, want 1", lost.Load())
	}
	h := got.AttemptHistory
	if got.Status != wire.StatusDone || got.Attempts != 1 || len(h) != 2 ||
		h[0].Status != "returned" || h[0].Attempt != 1 || h[1].Status != wire.StatusDone || h[1].Attempt != 1 {
		t.Fatalf("job %s after its lost claim reply: %s, %d attempts, history %+v; want done in its one attempt, after one returned",
			got.ID, got.Status, got.Attempts, h)
	}
}
