package worker

import (
	"context"
	"time"

	"github.com/workron/workron/api/wire"
)

// How a cancel or a gang's drain reaches the worker at once.
//
// While jobs run, the worker holds one long-poll (POST
// /workers/{id}/actions; one per worker, whatever its number of jobs) that
// the node answers as soon as the cluster asks one of its attempts to
// stop, or empty after PollWait (at least a second). It proposes nothing
// and renews no lease; the heartbeat still does, and its reply still
// carries the same actions, so a refused or failed poll (a node of a
// release without the route answers 404, or 403 from its table of routes)
// costs only the latency the heartbeat always had: the worker asks again
// after a backoff of 1s doubling to a minute, as it does after an answer
// that came at once with nothing it could stop.

// maxUnknownActions bounds the attempts the worker remembers it was told
// about without running them (a claim reply it never received).
const maxUnknownActions = 256

// actionsLoop holds the actions long-poll while jobs run, until ctx ends,
// and acts on what it answers as on a heartbeat's reply.
func (w *Worker) actionsLoop(ctx context.Context) {
	bo := newBackoff(time.Second, time.Minute)
	unknown := make(map[wire.JobLease]time.Time) // told, not run here: until when to name it known
	for {
		if w.runningCount() == 0 {
			select {
			case <-ctx.Done():
				return
			case <-w.watchJobs:
			}
			continue
		}
		req := wire.WorkerActionsRequest{Known: w.knownActions(unknown), Wait: w.actionsWait().String()}
		began := time.Now()
		resp, err := w.client.WorkerActions(ctx, w.cfg.ID, req)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			w.log.Debug("actions long-poll failed: cancels arrive with heartbeats meanwhile", "err", err)
			if !sleep(ctx, bo.next()) {
				return
			}
			continue
		}
		// An empty answer after the wait is no spin; one at once is.
		stopped := len(resp.Actions) == 0 && time.Since(began) >= w.actionsWait()/2
		for _, a := range resp.Actions {
			if w.act(a) {
				stopped = true
			} else if len(unknown) < maxUnknownActions {
				unknown[wire.JobLease{JobID: a.JobID, Lease: a.Lease}] = time.Now().Add(w.currentLeaseTTL())
			}
		}
		if stopped {
			bo.reset()
		} else if !sleep(ctx, bo.next()) { // answered at once, with nothing it could stop
			return
		}
	}
}

// actionsWait is how long one actions long-poll waits: PollWait, at
// least a second.
func (w *Worker) actionsWait() time.Duration { return max(w.cfg.PollWait, time.Second) }

// knownActions lists the attempts whose actions the worker already has:
// the running ones it was asked to stop, and those it was told about but
// does not run (until their lease has run out), dropping the latter's
// expired entries.
func (w *Worker) knownActions(unknown map[wire.JobLease]time.Time) []wire.JobLease {
	now := time.Now()
	var out []wire.JobLease
	for jl, until := range unknown {
		if now.After(until) {
			delete(unknown, jl)
			continue
		}
		out = append(out, jl)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.running {
		if t.stopped.Load() {
			out = append(out, wire.JobLease{JobID: t.job.ID, Lease: t.job.Lease})
		}
	}
	return out
}
