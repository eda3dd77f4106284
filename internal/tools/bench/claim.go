package bench

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/poll"
)

// claimDone pre-submits --jobs jobs, then has --clients virtual workers
// claim up to max at a time (waiting 1s) and report each done, until all are.
func (b *bencher) claimDone(ctx context.Context, name string, claimMax int) ([]Figure, error) {
	leader, _, err := b.roles(ctx)
	if err != nil {
		return nil, err
	}
	queue := b.queue(name)
	t := newTracker()
	var errs atomic.Int64
	if err := b.preSubmit(ctx, leader, wire.SubmitRequest{Command: "true", Queue: queue}, t, &errs); err != nil {
		return nil, err
	}
	return []Figure{b.drainQueue(ctx, name, leader, queue, claimMax, t, &errs)}, nil
}

// preSubmit submits --jobs copies of job to leader in batches, and fails
// unless every one was accepted.
func (b *bencher) preSubmit(ctx context.Context, leader string, job wire.SubmitRequest, t *tracker, errs *atomic.Int64) error {
	n := b.cfg.Jobs
	b.submitJobs(ctx, leader, job, n, benchBatchSize, benchBatchClients, time.Time{}, t, errs)
	if got := t.accepted(); got != n {
		return fmt.Errorf("pre-submitted %d of %d jobs", got, n)
	}
	return nil
}

// drainQueue has --clients virtual workers claim up to claimMax at a time
// (waiting 1s) from queue and report each job done, until the jobs of t
// are; the figure is jobs done per second. claim_done_piggyback and
// claim_done_batched carry the reports on the next claim, as the Go worker
// does; claim_done sends each on its own.
func (b *bencher) drainQueue(ctx context.Context, name, leader, queue string, claimMax int, t *tracker, errs *atomic.Int64) Figure {
	n := t.accepted()
	runCtx, cancel := context.WithTimeout(ctx, 60*time.Second+time.Duration(n)*10*time.Millisecond)
	defer cancel()
	left := newCountdown(n, cancel)
	ph := b.startPhase(ctx, name, leader)
	var wg sync.WaitGroup
	for i := range b.cfg.Clients {
		w := benchWorker{b: b, base: leader, id: fmt.Sprintf("bench-%s-w%d", b.runID, i), queue: queue,
			max: claimMax, wait: "1s", t: t, errs: errs, onDone: left.done, piggyback: name == "claim_done_piggyback" || name == "claim_done_batched"}
		wg.Go(func() { w.run(runCtx) })
	}
	wg.Wait()
	fg := Figure{Figure: name, Unit: "jobs/s", Clients: b.cfg.Clients, Target: "leader", Jobs: n}
	var problems []string
	stop, ok := left.end()
	if !ok {
		problems = append(problems, fmt.Sprintf("timed out with %d of %d jobs not done", left.left.Load(), n))
	}
	d := ph.end(ctx, stop, &fg)
	fg.Value, fg.Errors = float64(n)/d.Seconds(), errs.Load()
	fg.Note = fmt.Sprintf("claim max %d (wait 1s) then POST /jobs/{id}/done per job", claimMax)
	switch {
	case name == "claim_done_piggyback":
		fg.Note = "claim max 1 (wait 1s) carrying the done report of the previous job: one round trip per job"
	case claimMax > 1:
		fg.Note = fmt.Sprintf("claim max %d carrying the done reports of the previous claim: one round trip per claim", claimMax)
	}
	fg.check(problems, t.check(true), b.verifyQueue(ctx, leader, queue, wire.StatusDone, t))
	return fg
}

// benchWorker is a virtual worker: it claims from one queue and reports
// every job done at once.
type benchWorker struct {
	b      *bencher
	base   string
	id     string
	queue  string
	max    int
	wait   string
	t      *tracker
	errs   *atomic.Int64
	onDone func() // called once per job reported done
	// piggyback sends each done report with the next claim instead of on
	// its own (one round trip per job).
	piggyback bool
	// longPollReports claims as the Go worker (worker.Worker) does: the
	// done reports ride on the next claim, which then does not wait; a
	// claim with nothing to report long-polls (wait).
	longPollReports bool
}

func (w *benchWorker) run(ctx context.Context) {
	if w.piggyback {
		w.runPiggyback(ctx)
		return
	}
	if w.longPollReports {
		w.runLongPollReports(ctx)
		return
	}
	// Numbered like the Go worker's claims (worker.Worker), so that a
	// long-poll may take a job in the entry that submits it.
	req := wire.ClaimRequest{WorkerID: w.id, Queues: []string{w.queue}, Max: w.max, Wait: w.wait}
	for ctx.Err() == nil {
		var reply struct {
			Jobs []jobRef `json:"jobs"`
		}
		req.ClaimSeq++
		st, err := w.b.do(ctx, http.MethodPost, w.base+"/jobs/claim", mustJSON(req), &reply, w.errs)
		at := time.Now()
		if classify(st, err) != outOK {
			if ctx.Err() != nil {
				return
			}
			w.errs.Add(1)
			w.b.noteError("claim", st, err)
			sleepCtx(ctx, 20*time.Millisecond)
			continue
		}
		for _, j := range reply.Jobs {
			w.t.claimed(j.ID, j.Attempts, j.Lease, at)
		}
		if len(reply.Jobs) == 1 {
			w.report(ctx, reply.Jobs[0].ID, reply.Jobs[0].Lease)
			continue
		}
		w.reportBatch(ctx, reply.Jobs)
	}
}

// runPiggyback claims up to max jobs at a time, each claim carrying the
// done reports of the jobs of the claim before it; the last reports go on
// their own.
func (w *benchWorker) runPiggyback(ctx context.Context) {
	var pending []jobRef
	for ctx.Err() == nil {
		// No long-poll: a worker whose claim comes back empty must not hold
		// its last report back for the length of a wait.
		req := wire.ClaimRequest{WorkerID: w.id, Queues: []string{w.queue}, Max: w.max, Reports: doneReports(pending)}
		var ok bool
		if pending, ok = w.claimReporting(ctx, req, pending); !ok {
			continue
		}
		if len(pending) == 0 {
			sleepCtx(ctx, 5*time.Millisecond) // the queue is empty: poll gently
		}
	}
	if len(pending) > 0 {
		w.reportBatch(context.WithoutCancel(ctx), pending)
	}
}

// runLongPollReports claims up to max jobs at a time by the Go worker's
// rule: a claim carries the done reports of the jobs before it and then
// does not wait, so a worker with work left reports and claims in one round
// trip (one log entry when a job is ready); a claim with nothing to report
// long-polls, so a job submitted meanwhile is handed to it.
func (w *benchWorker) runLongPollReports(ctx context.Context) {
	var pending []jobRef
	req := wire.ClaimRequest{WorkerID: w.id, Queues: []string{w.queue}, Max: w.max}
	for ctx.Err() == nil {
		req.ClaimSeq++
		req.Reports, req.Wait = nil, w.wait
		if len(pending) > 0 {
			req.Reports, req.Wait = doneReports(pending), "0s"
		}
		pending, _ = w.claimReporting(ctx, req, pending)
	}
	if len(pending) > 0 {
		w.reportBatch(context.WithoutCancel(ctx), pending)
	}
}

// claimReporting sends one claim req carrying the done reports of
// pending, and returns what is pending after it: pending less the reports
// the reply settled, plus the jobs it claimed. On a failed round (ok
// false) nothing is settled and pending is returned as it was, after a
// short rest; a repeated report for the same lease is answered like the
// first, so the next round may send them again.
func (w *benchWorker) claimReporting(ctx context.Context, req wire.ClaimRequest, pending []jobRef) (_ []jobRef, ok bool) {
	var reply struct {
		Jobs    []jobRef                 `json:"jobs"`
		Reports []wire.BatchReportResult `json:"reports"`
	}
	st, err := w.b.do(ctx, http.MethodPost, w.base+"/jobs/claim", mustJSON(req), &reply, w.errs)
	at := time.Now()
	if classify(st, err) != outOK || len(reply.Reports) != len(pending) {
		if ctx.Err() == nil {
			w.errs.Add(1)
			w.b.noteError("claim", st, err)
			sleepCtx(ctx, 20*time.Millisecond)
		}
		return pending, false
	}
	pending = w.settle(pending, reply.Reports)
	for _, j := range reply.Jobs {
		w.t.claimed(j.ID, j.Attempts, j.Lease, at)
		pending = append(pending, j)
	}
	return pending, true
}

// reportBatch sends done for several attempts in one POST /jobs/reports,
// retrying the reports whose outcome is not known. A repeated report for
// the same lease is answered like the first, so retries are safe.
func (w *benchWorker) reportBatch(ctx context.Context, jobs []jobRef) {
	left := jobs
	for try := 0; try < 20 && len(left) > 0 && ctx.Err() == nil; try++ {
		req := wire.BatchReportRequest{Reports: doneReports(left)}
		var reply wire.BatchReportResponse
		st, err := w.b.do(ctx, http.MethodPost, w.base+"/jobs/reports", mustJSON(req), &reply, w.errs)
		if ctx.Err() != nil {
			return
		}
		if classify(st, err) != outOK || len(reply.Results) != len(left) {
			w.errs.Add(1)
			w.b.noteError("report batch", st, err)
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		left = w.settle(left, reply.Results)
	}
}

// doneReports are "done" reports for the attempts of jobs.
func doneReports(jobs []jobRef) []wire.BatchReport {
	out := make([]wire.BatchReport, len(jobs))
	for i, j := range jobs {
		out[i] = wire.BatchReport{JobID: j.ID, Status: wire.StatusDone, ReportRequest: wire.ReportRequest{Lease: j.Lease}}
	}
	return out
}

// settle records the answers to reports sent for the attempts in sent (in
// order) and returns the attempts whose outcome is still unknown.
func (w *benchWorker) settle(sent []jobRef, results []wire.BatchReportResult) []jobRef {
	var retry []jobRef
	for i, r := range results {
		switch {
		case r.Status == wire.StatusDone:
			w.t.done(sent[i].ID, sent[i].Lease)
			w.onDone()
		case wire.RetryReport(r.Code):
			retry = append(retry, sent[i])
		default:
			w.errs.Add(1)
			w.b.noteError("report done", http.StatusConflict, fmt.Errorf("%s: %s", r.Code, r.Error))
		}
	}
	return retry
}

// report sends done for one attempt, retrying while the outcome is not
// known. A 409 after an unknown outcome means the first try took effect;
// the final checks confirm it.
func (w *benchWorker) report(ctx context.Context, id string, lease uint64) {
	body := fmt.Appendf(nil, `{"lease":%d}`, lease)
	unsure := false
	for try := 0; try < 20 && ctx.Err() == nil; try++ {
		st, err := w.b.do(ctx, http.MethodPost, w.base+"/jobs/"+id+"/done", body, nil, w.errs)
		if ctx.Err() != nil {
			return
		}
		switch classify(st, err) {
		case outOK:
			w.t.done(id, lease)
			w.onDone()
			return
		case outRejected:
			if st == http.StatusConflict && unsure {
				w.t.done(id, lease)
				w.onDone()
				return
			}
			w.errs.Add(1)
			w.b.noteError("report done", st, err)
			return
		case outUnknown:
			unsure = true
		}
		w.errs.Add(1)
		w.b.noteError("report done", st, err)
		sleepCtx(ctx, 50*time.Millisecond)
	}
}

// latencyWorker is the i-th worker of the latency scenario: one slot,
// claiming by the Go worker's rule (runLongPollReports), so that between
// two jobs it makes the one round trip `workron worker` makes, not a
// claim and a separate done.
func (b *bencher) latencyWorker(leader, queue string, i int, t *tracker, errs *atomic.Int64, onDone func()) *benchWorker {
	return &benchWorker{b: b, base: leader, id: fmt.Sprintf("bench-%s-lw%d", b.runID, i), queue: queue,
		max: 1, wait: "30s", t: t, errs: errs, onDone: onDone, longPollReports: true}
}

// latency submits at --rate for --duration while --latency-workers
// long-polling workers claim and report done; it measures each job's time
// from the start of its submit request to the arrival of its claim reply.
func (b *bencher) latency(ctx context.Context) ([]Figure, error) {
	leader, _, err := b.roles(ctx)
	if err != nil {
		return nil, err
	}
	const name = "latency"
	queue := b.queue(name)
	t := newTracker()
	var errs atomic.Int64
	var done atomic.Int64
	workCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var running sync.WaitGroup
	workers := b.cfg.latencyWorkers()
	for i := range workers {
		w := b.latencyWorker(leader, queue, i, t, &errs, func() { done.Add(1) })
		running.Go(func() { w.run(workCtx) })
	}
	ph := b.startPhase(ctx, name, leader)
	body := mustJSON(wire.SubmitRequest{Command: "true", Queue: queue})
	interval := time.Duration(float64(time.Second) / b.cfg.Rate)
	sem := make(chan struct{}, benchLatencyInflight)
	var subs sync.WaitGroup
	for i := 0; ctx.Err() == nil; i++ {
		due := ph.start.Add(time.Duration(i) * interval)
		if due.Sub(ph.start) >= b.cfg.Duration {
			break
		}
		sleepCtx(ctx, time.Until(due))
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			continue // the loop ends
		}
		subs.Go(func() {
			defer func() { <-sem }()
			b.submit(ctx, leader, body, 1, t, &errs)
		})
	}
	subs.Wait()
	problems := []string{}
	if err := poll.True(ctx, 60*time.Second, 50*time.Millisecond, func() bool { return done.Load() >= int64(t.accepted()) }); err != nil {
		problems = append(problems, fmt.Sprintf("%d of %d jobs done after 60s", done.Load(), t.accepted()))
	}
	cancel()
	running.Wait()
	fg := Figure{Unit: "ms", Clients: workers, Target: "leader"}
	ph.end(ctx, time.Time{}, &fg)
	fg.Errors = errs.Load()
	lat := t.latencies()
	fg.Jobs = len(lat)
	fg.Note = fmt.Sprintf("submit→start (submit request sent → claim reply received) at %.0f jobs/s for %s, %d workers long-polling 30s",
		b.cfg.Rate, b.cfg.Duration, workers)
	fg.check(problems, t.check(true), b.verifyQueue(ctx, leader, queue, wire.StatusDone, t))
	var figs []Figure
	for _, q := range []struct {
		name string
		p    float64
	}{{"latency_p50", 0.50}, {"latency_p99", 0.99}, {"latency_max", 1}} {
		f := fg
		f.Figure, f.Value = q.name, percentile(lat, q.p)
		figs = append(figs, f)
	}
	return figs, nil
}

// countdown ends a phase once n jobs are done: the n-th call of done
// notes the time and calls cancel.
type countdown struct {
	left   atomic.Int64
	at     atomic.Pointer[time.Time]
	cancel context.CancelFunc
}

func newCountdown(n int, cancel context.CancelFunc) *countdown {
	c := &countdown{cancel: cancel}
	c.left.Store(int64(n))
	return c
}

// done counts one job done.
func (c *countdown) done() {
	if c.left.Add(-1) == 0 {
		now := time.Now()
		c.at.Store(&now)
		c.cancel()
	}
}

// end is when the last job was done, or now and false if not all were.
func (c *countdown) end() (time.Time, bool) {
	if at := c.at.Load(); at != nil {
		return *at, true
	}
	return time.Now(), false
}
