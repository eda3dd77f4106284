package bench

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/poll"
)

// Shape of bulk_retry.
const (
	benchBulkSubmitRate = 50              // single submits per second beside the bulk retry
	benchBulkBaseline   = 5 * time.Second // single submits measured before it
)

// bulkRetry measures a bulk retry (issue #30): it fills a queue with
// --bulk-jobs failed jobs (batch submits of jobs of one attempt, claimed
// 256 at a time by 8 workers whose next claim reports them failed), then
// sends single submits (POST /jobs, one job each) to another queue at
// benchBulkSubmitRate a second: for benchBulkBaseline alone, then while a
// bulk retry of every failed job of the queue (POST /bulk) runs to its end,
// polled every 100 ms. Figures: the retry's jobs per second and seconds,
// and the submits' p50 and p99 latency (request sent → reply read) before
// and during it. Correct if the action ends done with every job matched
// and done (none skipped or failed) and the queue then holds that many
// pending jobs.
func (b *bencher) bulkRetry(ctx context.Context) ([]Figure, error) {
	leader, _, err := b.roles(ctx)
	if err != nil {
		return nil, err
	}
	const name = "bulk_retry"
	queue, other := b.queue(name), b.queue(name+"_submits")
	n := b.cfg.BulkJobs
	b.progress("bench: bulk_retry: failing %d jobs", n)
	if _, err := b.fillFailed(ctx, leader, queue, n); err != nil {
		return nil, err
	}

	submits := &latencies{}
	subCtx, stopSubmits := context.WithCancel(ctx)
	var subs sync.WaitGroup
	subs.Go(func() { b.submitAtRate(subCtx, leader, other, submits) })
	sleepCtx(ctx, benchBulkBaseline)
	before := submits.take()

	b.progress("bench: bulk_retry: retrying %d failed jobs", n)
	ph := b.startPhase(ctx, name, leader)
	var op wire.Bulk
	st, err := b.call(ctx, http.MethodPost, leader+"/bulk", mustJSON(wire.BulkRequest{Action: wire.BulkRetry, Status: wire.StatusFailed, Queue: queue}), &op)
	if err != nil || st != http.StatusCreated {
		stopSubmits()
		subs.Wait()
		return nil, fmt.Errorf("bulk_retry: POST /bulk: HTTP %d: %v", st, err)
	}
	var problems []string
	perr := poll.Until(ctx, 10*time.Minute, 100*time.Millisecond, func() error {
		if st, err := b.call(ctx, http.MethodGet, leader+"/bulk/"+op.ID, nil, &op); err != nil || st != http.StatusOK {
			return fmt.Errorf("GET /bulk/%s: HTTP %d: %v", op.ID, st, err)
		}
		if op.State == wire.BulkRunning {
			return fmt.Errorf("bulk %s still running: %d of %d done", op.ID, op.Done, n)
		}
		return nil
	})
	end := time.Now()
	stopSubmits()
	subs.Wait()
	during := submits.take()
	if perr != nil {
		problems = append(problems, perr.Error())
	}
	if op.State != wire.BulkDone || op.Matched != int64(n) || op.Done != int64(n) || op.Skipped != 0 || op.Failed != 0 {
		problems = append(problems, fmt.Sprintf("the bulk retry ended %s with %d matched, %d done, %d skipped, %d failed; want done with %d matched and done",
			op.State, op.Matched, op.Done, op.Skipped, op.Failed, n))
	}
	var pending wire.BulkCount
	if _, err := b.call(ctx, http.MethodPost, leader+"/bulk", mustJSON(wire.BulkRequest{Action: wire.BulkCancel, Status: wire.StatusPending, Queue: queue, DryRun: true}), &pending); err != nil || pending.Matched != int64(n) {
		problems = append(problems, fmt.Sprintf("%d jobs of the queue pending after the retry, want %d (%v)", pending.Matched, n, err))
	}

	fg := Figure{Figure: name, Unit: "jobs/s", Jobs: n, Target: "leader"}
	d := ph.end(ctx, end, &fg)
	fg.Value = float64(n) / d.Seconds()
	fg.Note = fmt.Sprintf("POST /bulk retry of %d failed jobs until GET /bulk/{id} says done (%.1f s), %d single submits a second beside it",
		n, d.Seconds(), benchBulkSubmitRate)
	fg.check(problems)
	figs := []Figure{fg}
	for _, s := range []struct {
		name string
		lat  []float64
		p    float64
	}{
		{"bulk_retry_submit_p50_before", before, 0.50}, {"bulk_retry_submit_p99_before", before, 0.99},
		{"bulk_retry_submit_p50_during", during, 0.50}, {"bulk_retry_submit_p99_during", during, 0.99},
	} {
		f := Figure{Figure: s.name, Unit: "ms", Jobs: len(s.lat), Target: "leader", Value: percentile(s.lat, s.p), Correct: fg.Correct,
			Note: fmt.Sprintf("POST /jobs of one job, request sent → reply read, at %d a second", benchBulkSubmitRate)}
		figs = append(figs, f)
	}
	return figs, nil
}

// latencies collects request latencies in milliseconds.
type latencies struct {
	mu  sync.Mutex
	lat []float64
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lat = append(l.lat, float64(d)/float64(time.Millisecond))
}

// take returns what was collected, sorted, and starts over.
func (l *latencies) take() []float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.lat
	l.lat = nil
	slices.Sort(out)
	return out
}

// submitAtRate sends one POST /jobs every 1/benchBulkSubmitRate s until ctx
// ends, each in its own goroutine, and records each one answered 201.
func (b *bencher) submitAtRate(ctx context.Context, leader, queue string, l *latencies) {
	body := mustJSON(wire.SubmitRequest{Command: "true", Queue: queue})
	tick := time.NewTicker(time.Second / benchBulkSubmitRate)
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		wg.Go(func() {
			start := time.Now()
			st, err := b.call(context.WithoutCancel(ctx), http.MethodPost, leader+"/jobs", body, nil)
			if err == nil && st == http.StatusCreated {
				l.add(time.Since(start))
				return
			}
			b.noteError("submit beside the bulk retry", st, err)
		})
	}
}

// fillFailed puts n failed jobs in queue: batch submits of jobs of one
// attempt, which benchFillClaimers workers claim, each claim reporting
// the jobs of the one before failed. The tracker holds their ids.
func (b *bencher) fillFailed(ctx context.Context, leader, queue string, n int) (*tracker, error) {
	one := 1
	t := newTracker()
	var errs, failed atomic.Int64
	b.submitJobs(ctx, leader, wire.SubmitRequest{Command: "true", Queue: queue, MaxAttempts: &one}, n, benchBatchSize, benchBatchClients, time.Time{}, t, &errs)
	if got := t.accepted(); got != n {
		return nil, fmt.Errorf("bulk_retry: %d of %d submits accepted", got, n)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i := range benchFillClaimers {
		id := fmt.Sprintf("bench-%s-fail%d", b.runID, i)
		wg.Go(func() { b.failWorker(runCtx, leader, id, queue, &failed) })
	}
	err := poll.True(ctx, 10*time.Minute, 100*time.Millisecond, func() bool { return failed.Load() >= int64(n) })
	cancel()
	wg.Wait()
	if err != nil {
		return nil, fmt.Errorf("bulk_retry: %d of %d jobs failed: %w", failed.Load(), n, err)
	}
	return t, nil
}

// failWorker claims up to benchFillClaimMax jobs at a time, each claim
// reporting those of the claim before failed, until ctx ends.
func (b *bencher) failWorker(ctx context.Context, base, id, queue string, failed *atomic.Int64) {
	var pending []jobRef
	report := func(ctx context.Context, reqPath string, req any, reports *[]wire.BatchReportResult) bool {
		var reply struct {
			Jobs    []jobRef                 `json:"jobs"`
			Reports []wire.BatchReportResult `json:"reports"`
			Results []wire.BatchReportResult `json:"results"`
		}
		st, err := b.call(ctx, http.MethodPost, base+reqPath, mustJSON(req), &reply)
		if classify(st, err) != outOK {
			if ctx.Err() == nil {
				b.noteError("fail claim", st, err)
			}
			return false
		}
		*reports = append(reply.Reports, reply.Results...)
		for _, r := range *reports {
			if r.Status == wire.StatusFailed {
				failed.Add(1)
			}
		}
		pending = reply.Jobs
		return true
	}
	reportsOf := func() []wire.BatchReport {
		var out []wire.BatchReport
		for _, j := range pending {
			out = append(out, wire.BatchReport{JobID: j.ID, Status: wire.StatusFailed, ReportRequest: wire.ReportRequest{Lease: j.Lease, Error: "timeout"}})
		}
		return out
	}
	var res []wire.BatchReportResult
	for ctx.Err() == nil {
		req := wire.ClaimRequest{WorkerID: id, Queues: []string{queue}, Max: benchFillClaimMax, Wait: "1s", Reports: reportsOf()}
		if !report(ctx, "/jobs/claim", req, &res) {
			sleepCtx(ctx, 20*time.Millisecond)
		}
	}
	if len(pending) > 0 {
		report(context.WithoutCancel(ctx), "/jobs/reports", wire.BatchReportRequest{Reports: reportsOf()}, &res)
	}
}
