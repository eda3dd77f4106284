package hostile

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/workron/workron/api/wire"
)

// canaries is another tenant's steady trickle of submits while the attacks
// run: every job accepted must finish afterwards.
type canaries struct {
	cancel   context.CancelFunc
	done     chan struct{}
	mu       sync.Mutex
	accepted []string
}

func (e *env) startCanaries(ctx context.Context) *canaries {
	ctx, cancel := context.WithCancel(ctx)
	c := &canaries{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		i := 0
		every(ctx, canaryInterval, func() {
			i++
			var j wire.Job
			_, err := e.call(ctx, http.MethodPost, "/jobs", tokenOtherTenat,
				wire.SubmitRequest{Command: "true", Queue: "canary", IdempotencyKey: fmt.Sprintf("canary-%d", i)}, &j)
			if err == nil && j.ID != "" {
				c.mu.Lock()
				c.accepted = append(c.accepted, j.ID)
				c.mu.Unlock()
			}
		})
	}()
	return c
}

// stop ends the trickle and returns the ids accepted.
func (c *canaries) stop() []string {
	c.cancel()
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.accepted)
}

// drainCanaries claims and completes the canary queue until every accepted
// id is done, and returns the ids that never finished.
func (e *env) drainCanaries(ctx context.Context, accepted []string) ([]string, error) {
	want := map[string]bool{}
	for _, id := range accepted {
		want[id] = true
	}
	deadline := time.Now().Add(drainTimeout)
	for time.Now().Before(deadline) {
		cr, _, err := e.claim(ctx, "canary", 100)
		if err != nil {
			return nil, err
		}
		var reports []wire.BatchReport
		for _, j := range cr.Jobs {
			reports = append(reports, wire.BatchReport{JobID: j.ID, Status: "done", ReportRequest: wire.ReportRequest{Lease: j.Lease}})
		}
		if err := e.report(ctx, reports); err != nil {
			return nil, err
		}
		if len(cr.Jobs) > 0 {
			continue
		}
		// Nothing to claim: see which accepted jobs are still not done.
		for id := range want {
			j, err := e.getJob(ctx, id)
			if err != nil {
				return nil, err
			}
			if j.Status == wire.StatusDone {
				delete(want, id)
			}
		}
		if len(want) == 0 {
			return nil, nil
		}
		settle(ctx, 500*time.Millisecond)
	}
	var lost []string
	for id := range want {
		lost = append(lost, id)
	}
	slices.Sort(lost)
	return lost, nil
}
