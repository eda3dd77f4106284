package worker

import (
	"context"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker/client"
)

// heartbeatLoop renews the worker's leases every third of the lease TTL
// while it holds any (a job runs or waits for its report's answer), until
// ctx ends. It sleeps while the worker is idle.
func (w *Worker) heartbeatLoop(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		if !w.busy() {
			select {
			case <-ctx.Done():
				return
			case <-w.jobsBegan:
			}
			continue
		}
		wait := w.currentLeaseTTL() / 3
		for {
			t.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if !w.busy() {
				break
			}
			if err := w.heartbeatOnce(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				w.log.Warn("heartbeat failed", "err", err)
				wait = min(w.currentLeaseTTL()/3, time.Second)
				continue
			}
			wait = w.currentLeaseTTL() / 3
		}
	}
}

// heartbeatOnce sends one worker heartbeat and acts on its reply: it stops
// the jobs the server cancelled or preempted, and registers again when the
// server forgot the worker.
func (w *Worker) heartbeatOnce(ctx context.Context) error {
	resp, err := w.client.WorkerHeartbeat(ctx, w.cfg.ID, w.runningLeases())
	if client.IsNotFound(err) {
		w.reregister(ctx)
		return nil
	}
	if err != nil {
		return err
	}
	for _, a := range resp.Actions {
		w.act(a)
	}
	return nil
}

// runningLeases lists the attempts this worker holds, for a heartbeat: those
// running and those whose reports have not been answered yet.
func (w *Worker) runningLeases() []wire.JobLease {
	out := w.reports.leases()
	seen := make(map[wire.JobLease]bool, len(out))
	for _, jl := range out {
		seen[jl] = true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.running {
		if jl := (wire.JobLease{JobID: t.job.ID, Lease: t.job.Lease}); !seen[jl] {
			out = append(out, jl)
		}
	}
	return out
}

// act carries out one action of a heartbeat reply.
func (w *Worker) act(a wire.JobAction) {
	var cause error
	switch a.Action {
	case wire.ActionCancel:
		cause = errCancelled
	case wire.ActionPreempt:
		cause = preemption(a.PreemptionEpoch)
	default:
		w.log.Warn("unknown heartbeat action ignored", "job_id", a.JobID, "action", a.Action)
		return
	}
	if w.cancelJob(a.JobID, a.Lease, cause) {
		w.log.Info("stopping job on the server's request", "job_id", a.JobID, "action", a.Action)
	}
}
