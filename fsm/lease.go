package fsm

import (
	"fmt"

	"github.com/workron/workron/store"
)

// currentAttempt loads a job and checks that lease names its current attempt
// (0 means "whatever attempt is current", as the seed's workers send).
func (a *applier) currentAttempt(id string, lease uint64) (*store.Job, error) {
	j, err := a.job(id)
	if err != nil {
		return nil, err
	}
	if lease != 0 && lease != j.Lease {
		return nil, fmt.Errorf("job %s lease %d (current %d): %w", id, lease, j.Lease, ErrStaleLease)
	}
	if !j.Status.Leased() {
		if lease != 0 {
			return nil, fmt.Errorf("job %s lease %d: %w", id, lease, ErrStaleLease)
		}
		return nil, fmt.Errorf("job %s is %s: %w", id, j.Status, ErrNotRunning)
	}
	return j, nil
}

// heartbeat renews one job's lease. A cancelling job's reply says so.
func (a *applier) heartbeat(h *Heartbeat) Result {
	j, err := a.currentAttempt(h.JobID, h.Lease)
	if err != nil {
		return Result{Err: err}
	}
	a.renew(j, h.LeaseTTL)
	r := Result{Jobs: []*store.Job{j}, Deadline: j.LeaseDeadline, Renewed: 1}
	if j.Status == store.StatusCancelling {
		r.Actions = []Action{{JobID: j.ID, Lease: j.Lease, Action: "cancel"}}
	}
	r.Actions = append(r.Actions, preemptActions(j)...)
	return r
}

func (a *applier) renew(j *store.Job, ttl int64) {
	d := a.deadline(j, ttl)
	if d == j.LeaseDeadline {
		return
	}
	prev := j.Status
	a.unindex(j)
	j.LeaseDeadline = d
	a.put(j, prev)
}

// workerHeartbeat marks a registered worker alive and renews the leases it
// says it runs (or all it holds, if it does not say), telling it which of
// its jobs to cancel.
func (a *applier) workerHeartbeat(h *WorkerHeartbeat) Result {
	w, err := a.tx.Worker(h.WorkerID)
	if err == store.ErrNotFound {
		return Result{Err: fmt.Errorf("worker %s: %w", h.WorkerID, ErrWorkerNotFound)}
	}
	a.must(err)
	w.LastHeartbeat = a.now
	a.must(a.tx.PutWorker(w, a.index))
	r := Result{Worker: w, Deadline: after(a.now, h.LeaseTTL)}
	var listed map[string]uint64
	if h.Listed {
		listed = make(map[string]uint64, len(h.Leases))
		for _, l := range h.Leases {
			listed[l.JobID] = l.Lease
		}
	}
	for _, id := range a.f.idx.workerJobs(h.WorkerID) {
		j, err := a.job(id)
		if err != nil {
			continue
		}
		if lease, ok := listed[id]; h.Listed && (!ok || lease != j.Lease) {
			continue // the worker does not run this attempt: let it expire
		}
		a.renew(j, h.LeaseTTL)
		r.Renewed++
		if j.Status == store.StatusCancelling {
			r.Actions = append(r.Actions, Action{JobID: j.ID, Lease: j.Lease, Action: "cancel"})
		}
		r.Actions = append(r.Actions, preemptActions(j)...)
	}
	return r
}

// register records a worker, keeping its first registration time.
func (a *applier) register(r *Register) Result {
	w := r.Worker
	if w.ID == "" {
		return Result{Err: &ValidationError{Field: "id", Reason: "must not be empty"}}
	}
	if old, err := a.tx.Worker(w.ID); err == nil {
		w.RegisteredAt = old.RegisteredAt
	} else {
		w.RegisteredAt = a.now
	}
	w.LastHeartbeat = a.now
	a.must(a.tx.PutWorker(&w, a.index))
	a.f.idx.gx.setWorker(&w)
	a.readyChanged = true // its capacity or tags may fit waiting jobs now
	return Result{Worker: &w}
}
