package worker

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker/client"
)

// reportLinger is how long a finished attempt's report waits for the claim
// loop to carry it on its next claim before the reporter sends it alone.
const reportLinger = 5 * time.Millisecond

// pendingReport is one attempt's end on its way to the server.
type pendingReport struct {
	job    wire.Job
	out    outcome
	log    *slog.Logger
	queued time.Time // it is abandoned one lease TTL later
}

func (p *pendingReport) verb() string {
	if p.out.err != nil {
		return "fail"
	}
	return "done"
}

func (p *pendingReport) wire() wire.BatchReport {
	r := wire.BatchReport{
		JobID:  p.job.ID,
		Status: wire.StatusDone,
		ReportRequest: wire.ReportRequest{Lease: p.job.Lease, ExitCode: p.out.exitCode, Output: p.out.output,
			Result: p.out.result, Progress: p.out.progress, TraceParent: p.job.TraceParent},
	}
	if p.out.err != nil {
		r.Status = wire.StatusFailed
		r.Error, r.Retry = p.out.err.Error(), p.out.retry
		p.out.hold.reportFields(&r.ReportRequest)
	}
	return r
}

// reportQueue holds the reports of finished attempts until the server has
// answered them. An attempt is "held" from the moment its report is queued
// until that answer, so heartbeats keep listing its lease (and the server
// keeps it) while the report waits or travels.
type reportQueue struct {
	mu      sync.Mutex
	pending []*pendingReport
	held    map[wire.JobLease]struct{}
	ready   chan struct{} // cap 1: something was queued
}

func newReportQueue() *reportQueue {
	return &reportQueue{held: make(map[wire.JobLease]struct{}), ready: make(chan struct{}, 1)}
}

// add queues a new report.
func (q *reportQueue) add(p *pendingReport) {
	q.mu.Lock()
	q.pending = append(q.pending, p)
	q.held[wire.JobLease{JobID: p.job.ID, Lease: p.job.Lease}] = struct{}{}
	q.mu.Unlock()
	signal(q.ready)
}

// take removes up to n reports, oldest first, for one request.
func (q *reportQueue) take(n int) []*pendingReport {
	q.mu.Lock()
	defer q.mu.Unlock()
	k := min(n, len(q.pending))
	if k == 0 {
		return nil
	}
	out := append([]*pendingReport(nil), q.pending[:k]...)
	q.pending = append(q.pending[:0], q.pending[k:]...)
	return out
}

// putBack queues reports again after their request failed, except those
// older than ttl, which it abandons.
func (q *reportQueue) putBack(ps []*pendingReport, ttl time.Duration) {
	var keep []*pendingReport
	for _, p := range ps {
		if time.Since(p.queued) > ttl {
			p.log.Error("report abandoned after one lease TTL", "report", p.verb())
			q.release(p)
			continue
		}
		keep = append(keep, p)
	}
	if len(keep) == 0 {
		return
	}
	q.mu.Lock()
	q.pending = append(keep, q.pending...)
	q.mu.Unlock()
	signal(q.ready)
}

// release forgets p once the server has answered it.
func (q *reportQueue) release(p *pendingReport) {
	q.mu.Lock()
	delete(q.held, wire.JobLease{JobID: p.job.ID, Lease: p.job.Lease})
	q.mu.Unlock()
}

// leases lists the held attempts.
func (q *reportQueue) leases() []wire.JobLease {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]wire.JobLease, 0, len(q.held))
	for jl := range q.held {
		out = append(out, jl)
	}
	return out
}

// queueReport hands a finished attempt's outcome to the reporter; the
// attempt's slot can be reused at once.
func (w *Worker) queueReport(log *slog.Logger, job wire.Job, out outcome) {
	w.reports.add(&pendingReport{job: job, out: out, log: log, queued: time.Now()})
}

// reportLoop sends the reports the claim loop has not carried, in batches
// (POST /jobs/reports) with one request at a time, so reports that queue
// up while one is in flight go together in the next. Transient failures
// are retried with backoff for up to one lease TTL per report. Once closing
// is closed (nothing more will be queued) it sends what is left and returns.
func (w *Worker) reportLoop(ctx context.Context, closing <-chan struct{}) {
	bo := newBackoff(100*time.Millisecond, 2*time.Second)
	closed := false
	for {
		if !closed {
			select {
			case <-w.reports.ready:
				// Give the claim loop a moment to take them along.
				select {
				case <-time.After(reportLinger):
				case <-closing:
					closed = true
				}
			case <-closing:
				closed = true
			}
		}
		for {
			batch := w.reports.take(wire.MaxBatchReports)
			if len(batch) == 0 {
				break
			}
			results, err := w.client.Reports(ctx, wireReports(batch))
			if err != nil {
				w.reportsFailed(batch, err)
				if !sleep(ctx, bo.next()) {
					return
				}
				continue
			}
			bo.reset()
			w.settleReports(batch, results)
		}
		if closed {
			return
		}
	}
}

func wireReports(ps []*pendingReport) []wire.BatchReport {
	out := make([]wire.BatchReport, len(ps))
	for i, p := range ps {
		out[i] = p.wire()
	}
	return out
}

// reportsFailed deals with a request carrying ps that got no answers: a
// transient failure queues them again, anything else drops them.
func (w *Worker) reportsFailed(ps []*pendingReport, err error) {
	if transient(err) {
		w.log.Warn("report failed, retrying", "reports", len(ps), "err", err)
		w.reports.putBack(ps, w.currentLeaseTTL())
		return
	}
	for _, p := range ps {
		p.log.Error("report refused", "report", p.verb(), "err", err)
		w.reports.release(p)
	}
}

// settleReports acts on the server's answers to ps, one result each in
// order: an answer without an error or one saying the lease is no longer
// current settles a report; one that was not recorded for a passing reason
// (no leader, an unknown outcome, a server error) queues it again.
func (w *Worker) settleReports(ps []*pendingReport, results []wire.BatchReportResult) {
	var again []*pendingReport
	var why string
	for i, p := range ps {
		r := results[i]
		switch {
		case r.Code == "":
			if p.log.Enabled(context.Background(), slog.LevelDebug) {
				p.log.Debug("reported", "report", p.verb(), "status", r.Status)
			}
		case r.Code == wire.CodeStaleLease, r.Code == wire.CodeNotFound, r.Code == wire.CodeNotRunning, r.Code == wire.CodeConflict:
			p.log.Warn("report dropped: the lease is no longer current", "report", p.verb(), "err", r.Error)
		case r.Code == wire.CodeUpgradeInProgress && (p.out.result != nil || p.out.progress != nil):
			// A member does not take results yet: report the end without them.
			p.log.Warn("result and progress dropped: a member of the cluster runs a release without them", "err", r.Error)
			p.out.result, p.out.progress = nil, nil
			again, why = append(again, p), r.Error
			continue
		case wire.RetryReport(r.Code), r.Code == codeUnavailable:
			again, why = append(again, p), r.Error
			continue
		case r.Code == wire.CodeUpgradeInProgress && p.out.hold.set():
			// A node of the cluster cannot take rate-limited or snoozed
			// yet: report a plain failure instead.
			p.log.Warn("report sent again as a plain failure: the cluster is being upgraded", "err", r.Error)
			p.out.hold = holdOff{}
			again, why = append(again, p), r.Error
			continue
		default:
			p.log.Error("report refused", "report", p.verb(), "code", r.Code, "err", r.Error)
		}
		w.reports.release(p)
	}
	if len(again) > 0 {
		w.log.Warn("reports not recorded, retrying", "reports", len(again), "err", why)
		w.reports.putBack(again, w.currentLeaseTTL())
	}
}

// codeUnavailable is what servers before the error codes of package wire
// answered for a report not recorded for a passing reason; a worker newer
// than its server (during a rolling upgrade) still retries it.
const codeUnavailable = "unavailable"

// transient reports whether err may go away by itself: a transport error or
// a 5xx or 429 reply.
func transient(err error) bool {
	s := client.StatusOf(err)
	return s == 0 || s >= 500 || s == http.StatusTooManyRequests
}
