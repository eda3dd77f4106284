package clustertest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/worker"
)

// runCounter is a typed handler that counts how often each job ran.
type runCounter struct {
	mu    sync.Mutex
	runs  map[string]int
	total atomic.Int64
}

func (rc *runCounter) handle(ctx context.Context, j *worker.Job) error {
	rc.mu.Lock()
	rc.runs[j.ID]++
	rc.mu.Unlock()
	rc.total.Add(1)
	select { // a little work, so the kill lands while jobs run
	case <-time.After(20 * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

func TestLeaderFailoverLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 200 jobs through a leader failover")
	}
	const jobs = 200
	c := newCluster(t, 3)
	// Submit through every node at once; idempotency keys make a retry
	// after an unknown outcome safe.
	began := time.Now()
	ids := make([]string, jobs)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for k := g; k < jobs; k += 8 {
				req := wire.SubmitRequest{Type: "count", IdempotencyKey: fmt.Sprintf("failover-%d", k), MaxAttempts: ptr(5)}
				j, err := submitRetrying(c.URL(k%c.Len()), req)
				if err != nil {
					t.Error(err)
					return
				}
				ids[k] = j.ID
			}
		})
	}
	wg.Wait()
	t.Logf("%s: submitted", time.Since(began))
	if t.Failed() {
		t.FailNow()
	}

	// Workers start once every job is in, so the kill lands mid-run.
	rc := &runCounter{runs: make(map[string]int)}
	for i := range 2 {
		startWorker(t, c, fmt.Sprintf("pool-%d", i), func(cfg *worker.Config) {
			cfg.Shell = false
			cfg.Concurrency = 8
		}, map[string]worker.HandlerFunc{"count": rc.handle})
	}
	old := c.Leader(t)
	clustertest.WaitFor(t, 20*time.Second, func() error {
		if n := rc.total.Load(); n < jobs/3 {
			return fmt.Errorf("%d of %d jobs ran", n, jobs)
		}
		return nil
	})
	t.Logf("%s: killing leader n%d after %d runs", time.Since(began), old+1, rc.total.Load())
	c.Kill(t, old)
	l := c.Leader(t)
	t.Logf("%s: n%d leads now", time.Since(began), l+1)

	var list wire.JobList
	clustertest.WaitFor(t, 30*time.Second, func() error {
		r := send(t, http.MethodGet, c.URL(l)+"/jobs?limit=1000", nil)
		if r.Status != http.StatusOK {
			return fmt.Errorf("list: %s", r)
		}
		list = decode[wire.JobList](t, r)
		done := 0
		for _, j := range list.Jobs {
			if j.Status == wire.StatusDone {
				done++
			}
		}
		if done != jobs {
			return fmt.Errorf("%d of %d jobs done (listed %d)", done, jobs, len(list.Jobs))
		}
		return nil
	})

	t.Logf("%s: all done", time.Since(began))
	t.Run("EveryAcceptedJobIsDoneExactlyOnce", func(t *testing.T) {
		byID := make(map[string]wire.Job, len(list.Jobs))
		for _, j := range list.Jobs {
			byID[j.ID] = j
		}
		reran, expired := 0, 0
		for _, id := range ids {
			j, ok := byID[id]
			if !ok {
				t.Errorf("accepted job %s is missing", id)
				continue
			}
			dones := 0
			for _, a := range j.AttemptHistory {
				switch {
				case a.Status == wire.StatusDone:
					dones++
				case strings.Contains(a.Error, "lease expired"):
					expired++
				}
			}
			if dones != 1 {
				t.Errorf("job %s has %d done attempts in its history: %+v", id, dones, j.AttemptHistory)
			}
			rc.mu.Lock()
			runs := rc.runs[id]
			rc.mu.Unlock()
			if runs < 1 {
				t.Errorf("job %s is done but no worker ran it", id)
			}
			if runs > 1 {
				reran++
			}
		}
		// At-least-once: a claim whose reply was lost in the failover
		// runs again after its lease expires. Worth a line, not a failure.
		t.Logf("%d of %d jobs ran more than once; %d leases expired", reran, jobs, expired)
	})

	t.Run("RestartedNodeCatchesUpWithEqualDigest", func(t *testing.T) {
		c.Restart(t, old)
		c.Leader(t)
		idx := c.Converged(t, 15*time.Second)
		t.Logf("all nodes at applied index %d with equal digests", idx)
	})
}

func ptr[T any](v T) *T { return &v }

// submitRetrying submits until the cluster answers 201 or 200 (an
// idempotency key matched), for up to 10s. 502 and 504 leave the outcome
// unknown, which the key makes safe to retry. It may run off the test's
// goroutine.
func submitRetrying(url string, req wire.SubmitRequest) (wire.Job, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := try(http.MethodPost, url+"/jobs", req)
		switch {
		case err != nil:
		case r.Status == http.StatusCreated || r.Status == http.StatusOK:
			var j wire.Job
			if err := json.Unmarshal(r.Body, &j); err != nil {
				return j, fmt.Errorf("submit: %s: %w", r, err)
			}
			return j, nil
		case r.Status == http.StatusBadGateway || r.Status == http.StatusServiceUnavailable || r.Status == http.StatusGatewayTimeout:
			err = fmt.Errorf("submit: %s", r)
		default:
			return wire.Job{}, fmt.Errorf("submit: %s", r)
		}
		if time.Now().After(deadline) {
			return wire.Job{}, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}
