package worker

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker/client"
)

// ErrLeaseLost is the cause (context.Cause) of a job's context that the
// worker ended because it could no longer hold the attempt's lease: no
// heartbeat renewed it for the lease's TTL, or the cluster answered that the
// attempt is no longer the job's current one (a heartbeat refused, or one
// whose reply names the lease lost). The cluster expires such a lease and
// may give the job to another worker; the worker stops the run (a shell job
// as on cancel: SIGTERM, then SIGKILL after the kill grace), sends no report
// for it, and leaves it out of its heartbeats.
var ErrLeaseLost = errors.New("worker: lease lost")

// heartbeatLoop renews the worker's leases every third of the lease TTL
// while it holds any (a job runs or waits for its report's answer), until
// ctx ends. It sleeps while the worker is idle. Between heartbeats it
// sends the progress jobs make (sendProgress): at once, or
// Config.ProgressInterval after the last progress sent.
func (w *Worker) heartbeatLoop(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	var lastProgress time.Time // when progress was last sent
	for {
		if !w.busy() {
			select {
			case <-ctx.Done():
				return
			case <-w.jobsBegan:
			}
			continue
		}
		due := time.Now().Add(w.heartbeatWait())
		var progressDue time.Time // zero: no progress to send early
		for {
			next := due
			if !progressDue.IsZero() && progressDue.Before(next) {
				next = progressDue
			}
			t.Reset(time.Until(next))
			select {
			case <-ctx.Done():
				return
			case <-w.progressed:
				if progressDue.IsZero() {
					progressDue = lastProgress.Add(w.cfg.ProgressInterval)
				}
				continue
			case <-t.C:
			}
			if !w.busy() {
				break
			}
			if now := time.Now(); now.Before(due) {
				progressDue = time.Time{}
				lastProgress = now
				if err := w.sendProgress(ctx); err != nil && ctx.Err() == nil {
					w.log.Warn("progress not sent", "err", err)
				}
				continue
			}
			lastProgress, progressDue = time.Now(), time.Time{} // the heartbeat carries it
			if err := w.heartbeatOnce(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				w.log.Warn("heartbeat failed", "err", err)
				due = time.Now().Add(min(w.currentLeaseTTL()/3, time.Second))
				continue
			}
			due = time.Now().Add(w.heartbeatWait())
		}
	}
}

// sendProgress sends, in a worker heartbeat of its own, the new progress
// of the running jobs that have some: it lists only those jobs (so it
// renews only their leases) and names no claims, so the cluster gives
// nothing back for the jobs it leaves out. One send carries every job's
// latest update, whatever the number of jobs: a worker sends at most one
// per Config.ProgressInterval.
func (w *Worker) sendProgress(ctx context.Context) error {
	if time.Now().UnixNano() < w.progressOff.Load() {
		return nil // the heartbeats will send it when the cluster takes it
	}
	jobs := w.withNewProgress(w.runningLeases())
	if len(jobs) == 0 {
		return nil
	}
	resp, err := w.sendHeartbeat(ctx, wire.WorkerHeartbeatRequest{Jobs: jobs})
	if err != nil {
		w.leasesRefused(jobs, err)
		return err
	}
	w.heartbeatAnswered(jobs, resp, time.Now())
	return nil
}

// heartbeatWait is how long to wait before the next heartbeat: a third of
// the lease TTL, but at most a second while a failed claim waits to be
// named (its jobs, if any, go back to the queue only then).
func (w *Worker) heartbeatWait() time.Duration {
	d := w.currentLeaseTTL() / 3
	if w.claimLost.Load() != 0 {
		d = min(d, time.Second)
	}
	return d
}

// heartbeatOnce sends one worker heartbeat and acts on its reply: it stops
// the jobs the server cancelled or preempted, and registers again when the
// server forgot the worker.
//
// It names the claims that had ended before it listed the running jobs
// (see claimEnded), so that the cluster gives back at once a job whose
// claim reply was lost.
func (w *Worker) heartbeatOnce(ctx context.Context) error {
	lost := w.claimLost.Load()
	req := wire.WorkerHeartbeatRequest{ClaimsTo: w.claimsEnded.Load()}
	if req.ClaimsTo != 0 {
		req.ClaimsFrom = w.claimsFrom
	}
	req.Jobs = w.runningLeases() // after ClaimsTo: its claims' jobs are in
	resp, err := w.sendHeartbeat(ctx, req)
	if client.IsNotFound(err) {
		w.reregister(ctx)
		return nil
	}
	if err != nil {
		w.leasesRefused(req.Jobs, err)
		return err
	}
	w.heartbeatAnswered(req.Jobs, resp, time.Now())
	if lost != 0 && req.ClaimsTo >= lost {
		w.claimLost.CompareAndSwap(lost, 0)
	}
	return nil
}

// heartbeatAnswered acts on resp, the reply (which came at got) of a
// heartbeat that listed leases: it stops the attempts the reply names lost
// (the cluster did not renew them), moves the lease end of the others, and
// carries out the reply's actions.
func (w *Worker) heartbeatAnswered(leases []wire.JobLease, resp *wire.WorkerHeartbeatResponse, got time.Time) {
	if len(resp.Lost) > 0 {
		lost := make(map[leaseKey]bool, len(resp.Lost))
		for _, l := range resp.Lost {
			lost[leaseKey{l.JobID, l.Lease}] = true
			w.loseLease(l.JobID, l.Lease, "lease not renewed by the cluster", "reason", l.Reason)
		}
		leases = slices.DeleteFunc(slices.Clone(leases), func(jl wire.JobLease) bool { return lost[leaseKey{jl.JobID, jl.Lease}] })
	}
	w.leasesRenewed(leases, got)
	for _, a := range resp.Actions {
		w.act(a)
	}
}

// leaseKey names one attempt: a job and its lease.
type leaseKey struct {
	jobID string
	lease uint64
}

// runningLeases lists the attempts this worker holds, for a heartbeat: those
// running (but not those stopped for their lease: stopLost) and those whose
// reports have not been answered yet.
//
// The running ones are read first: a job queues its report before it
// leaves the running set, so one that ends meanwhile is in the reports
// read after (or its report was answered and the cluster no longer runs
// it). Read the other way round, it could be in neither.
func (w *Worker) runningLeases() []wire.JobLease {
	w.mu.Lock()
	out := make([]wire.JobLease, 0, len(w.running))
	for _, t := range w.running {
		if !t.leaseLost.Load() {
			out = append(out, wire.JobLease{JobID: t.job.ID, Lease: t.job.Lease})
		}
	}
	w.mu.Unlock()
	seen := make(map[wire.JobLease]bool, len(out))
	for _, jl := range out {
		seen[jl] = true
	}
	for _, jl := range w.reports.leases() {
		if !seen[jl] {
			out = append(out, jl)
		}
	}
	return out
}

// act carries out one action of a heartbeat's (or an actions long-poll's)
// reply, and reports whether it stopped a job this worker runs.
func (w *Worker) act(a wire.JobAction) bool {
	var cause error
	switch a.Action {
	case wire.ActionCancel:
		cause = errCancelled
	case wire.ActionPreempt:
		cause = preemption(a.PreemptionEpoch)
	default:
		w.log.Warn("unknown heartbeat action ignored", "job_id", a.JobID, "action", a.Action)
		return false
	}
	if !w.cancelJob(a.JobID, a.Lease, cause) {
		return false
	}
	w.log.Info("stopping job on the server's request", "job_id", a.JobID, "action", a.Action)
	return true
}

// leasesRenewed moves the lease end of each running attempt of leases,
// renewed by a heartbeat whose reply came at got, to got plus the lease
// TTL. The cluster renewed them when it applied the heartbeat, before it
// answered, so this end is the cluster's or later, by the reply's transit:
// the worker stops late, never early (a worker whose clock runs slow stops
// later still). Not the send time: the client may retry a request for
// longer than the TTL, and the lease dates from the try that got through.
func (w *Worker) leasesRenewed(leases []wire.JobLease, got time.Time) {
	end := got.Add(w.currentLeaseTTL()).UnixNano()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, jl := range leases {
		if t := w.running[jl.JobID]; t != nil && t.job.Lease == jl.Lease && t.leaseEnd.Load() < end {
			t.leaseEnd.Store(end)
		}
	}
}

// leasesRefused stops the running attempts of leases with ErrLeaseLost when
// the cluster answered a heartbeat naming them with stale_lease or
// not_running: their leases are no longer current.
func (w *Worker) leasesRefused(leases []wire.JobLease, err error) {
	if code := client.CodeOf(err); code != wire.CodeStaleLease && code != wire.CodeNotRunning {
		return
	}
	for _, jl := range leases {
		w.loseLease(jl.JobID, jl.Lease, "lease refused by the cluster", "err", err)
	}
}

// loseLease stops the running attempt of job id under lease, if any, for
// its lost lease (why, with the log's args): stopLost.
func (w *Worker) loseLease(id string, lease uint64, why string, args ...any) {
	w.mu.Lock()
	t := w.running[id]
	w.mu.Unlock()
	if t != nil && t.job.Lease == lease {
		w.stopLost(t, why, args...)
	}
}

// stopLost stops t with ErrLeaseLost, once, unless its run ended first:
// the worker reports nothing for it, and its heartbeats leave it out (the
// cluster lets the lease expire, if it has not). why says how the lease
// was lost, for the log, with args.
func (w *Worker) stopLost(t *task, why string, args ...any) {
	if !t.leaseGone.CompareAndSwap(false, true) {
		return // the run ended, or was stopped for its lease already
	}
	t.leaseLost.Store(true)
	w.log.Warn(why+": stopping the job", append([]any{"job_id", t.job.ID, "lease", t.job.Lease}, args...)...)
	t.cancel(ErrLeaseLost)
}

// watchLease stops t with ErrLeaseLost at its lease's end (t.leaseEnd,
// which heartbeats move on: leasesRenewed) unless t ended first. Its timer
// runs apart from the heartbeats, so a heartbeat whose request hangs does
// not hold the stop back.
func (w *Worker) watchLease(t *task) {
	if t.leaseGone.Load() {
		return // the run ended, or was stopped for its lease
	}
	if left := time.Until(time.Unix(0, t.leaseEnd.Load())); left > 0 {
		time.AfterFunc(left, func() { w.watchLease(t) })
		return
	}
	w.stopLost(t, "lease not renewed within its TTL")
}
