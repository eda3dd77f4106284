package bench

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/workron/workron/api/wire"
)

// submit sends one submit request (POST /jobs, or /jobs/batch with
// Prefer: return=minimal when size > 1) and records the jobs. It does not
// retry a request whose outcome is unknown (that needs idempotency keys,
// which would change what is measured); the checks allow for such jobs.
func (b *bencher) submit(ctx context.Context, target string, body []byte, size int, t *tracker, errs *atomic.Int64) {
	u, prefer := target+"/jobs", ""
	if size > 1 {
		u, prefer = u+"/batch", wire.PreferMinimal
	}
	start := time.Now()
	var reply struct {
		jobRef          // POST /jobs
		IDs    []string `json:"ids"`  // POST /jobs/batch
		Jobs   []jobRef `json:"jobs"` // from a server without the minimal reply (--bin)
	}
	st, err := b.doPrefer(ctx, http.MethodPost, u, body, prefer, &reply, errs)
	for _, j := range reply.Jobs {
		reply.IDs = append(reply.IDs, j.ID)
	}
	o := classify(st, err)
	if o == outOK && size > 1 && len(reply.IDs) != size {
		// Not one id a job: the reply is not what was asked for.
		o, err = outRejected, fmt.Errorf("POST %s: %d ids in the reply to a batch of %d", u, len(reply.IDs), size)
	}
	switch {
	case o == outOK && size == 1:
		t.submitted(reply.ID, start)
		return
	case o == outOK:
		for _, id := range reply.IDs {
			t.submitted(id, start)
		}
		return
	case o == outUnknown && ctx.Err() == nil:
		t.submitUnknown(size)
	}
	errs.Add(1)
	b.noteError("submit", st, err)
}

// submitMany has clients clients submit n jobs of `true` to queue (or
// submit until the deadline, if set) on target, per jobs to a request.
func (b *bencher) submitMany(ctx context.Context, target, queue string, n, per, clients int, deadline time.Time, t *tracker, errs *atomic.Int64) {
	b.submitJobs(ctx, target, wire.SubmitRequest{Command: "true", Queue: queue}, n, per, clients, deadline, t, errs)
}

// submitJobs is submitMany for n copies of job.
func (b *bencher) submitJobs(ctx context.Context, target string, job wire.SubmitRequest, n, per, clients int, deadline time.Time, t *tracker, errs *atomic.Int64) {
	jobs := make([]wire.SubmitRequest, per)
	for i := range jobs {
		jobs[i] = job
	}
	single := mustJSON(jobs[0])
	var next atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				size := per
				if deadline.IsZero() {
					from := int(next.Add(int64(per))) - per
					if from >= n {
						return
					}
					size = min(per, n-from)
				} else if time.Now().After(deadline) {
					return
				}
				body := single
				if size > 1 {
					body = mustJSON(wire.BatchSubmitRequest{Jobs: jobs[:size]})
				}
				b.submit(ctx, target, body, size, t, errs)
			}
		})
	}
	wg.Wait()
}

func (b *bencher) submitSingle(ctx context.Context) ([]Figure, error) {
	leader, followers, err := b.roles(ctx)
	if err != nil {
		return nil, err
	}
	figs := []Figure{b.submitLoad(ctx, "submit_single", leader, leader, "leader", b.cfg.Jobs, 1, b.cfg.Clients)}
	if len(followers) > 0 {
		figs = append(figs, b.submitLoad(ctx, "submit_single_follower", leader, followers[0], "follower", max(b.cfg.Jobs/4, 1), 1, b.cfg.Clients))
	}
	return figs, nil
}

func (b *bencher) submitBatch(ctx context.Context) ([]Figure, error) {
	leader, _, err := b.roles(ctx)
	if err != nil {
		return nil, err
	}
	return []Figure{b.submitLoad(ctx, "submit_batch", leader, leader, "leader", 2*b.cfg.Jobs, benchBatchSize, benchBatchClients)}, nil
}

// submitLoad measures clients clients submitting n jobs (or for
// --submit-for) to target, per jobs to a request, into a queue nobody serves.
func (b *bencher) submitLoad(ctx context.Context, name, leader, target, role string, n, per, clients int) Figure {
	queue := b.queue(name)
	t := newTracker()
	var errs atomic.Int64
	var deadline time.Time
	ph := b.startPhase(ctx, name, leader)
	if b.cfg.SubmitFor > 0 {
		deadline = ph.start.Add(b.cfg.SubmitFor)
	}
	b.submitMany(ctx, target, queue, n, per, clients, deadline, t, &errs)
	fg := Figure{Figure: name, Unit: "jobs/s", Clients: clients, Target: role}
	d := ph.end(ctx, time.Time{}, &fg)
	fg.Jobs, fg.Errors = t.accepted(), errs.Load()
	fg.Value = float64(fg.Jobs) / d.Seconds()
	fg.Note = "POST /jobs, one job each, keep-alive; the jobs stay pending"
	if per > 1 {
		fg.Note = fmt.Sprintf("POST /jobs/batch, %d jobs each, Prefer: return=minimal (the reply is the ids); the jobs stay pending", per)
	}
	fg.check(t.check(false), b.verifyQueue(ctx, leader, queue, wire.StatusPending, t))
	return fg
}
