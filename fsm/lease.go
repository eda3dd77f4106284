package fsm

import (
	"errors"
	"fmt"

	"github.com/workron/workron/store"
)

// currentAttempt loads a job and checks that lease names its current attempt
// (0 means "whatever attempt is current", as v0 workers send).
func (a *applier) currentAttempt(id string, lease uint64) (*store.Job, error) {
	j, err := a.job(id)
	if err != nil {
		return nil, err
	}
	if err := attemptIs(j, lease); err != nil {
		return nil, err
	}
	return j, nil
}

// ownAttempt is currentAttempt for a worker's call with its token name:
// only the token that claimed the attempt may act on it (the check is
// skipped when either name is empty: auth off, or a claim from before
// ProtocolFence), and an attempt whose claim handed out its lease needs
// it.
func (a *applier) ownAttempt(id string, lease uint64, token string) (*store.Job, error) {
	j, err := a.job(id)
	if err != nil {
		return nil, err
	}
	if j.Status.Leased() {
		if err := claimedBy(j, token); err != nil {
			return nil, err
		}
		if lease == 0 && j.Fenced {
			return nil, fmt.Errorf("job %s was claimed with a lease: give it: %w", id, ErrLeaseRequired)
		}
	}
	if err := attemptIs(j, lease); err != nil {
		return nil, err
	}
	return j, nil
}

// claimedBy checks that token may act on j's last attempt: the one that
// claimed it, or any when either name is empty.
func claimedBy(j *store.Job, token string) error {
	if token != "" && j.ClaimToken != "" && token != j.ClaimToken {
		return fmt.Errorf("job %s: its attempt was claimed by another token: %w", j.ID, ErrForbidden)
	}
	return nil
}

// attemptIs checks that lease names j's current attempt.
func attemptIs(j *store.Job, lease uint64) error {
	id := j.ID
	if lease != 0 && lease != j.Lease {
		return fmt.Errorf("job %s lease %d (current %d): %w", id, lease, j.Lease, ErrStaleLease)
	}
	if !j.Status.Leased() {
		if lease != 0 {
			return fmt.Errorf("job %s lease %d: %w", id, lease, ErrStaleLease)
		}
		return fmt.Errorf("job %s is %s: %w", id, j.Status, ErrNotRunning)
	}
	return nil
}

// heartbeat renews one job's lease, keeping the progress it gives. A
// cancelling job's reply says so.
func (a *applier) heartbeat(h *Heartbeat) Result {
	j, err := a.ownAttempt(h.JobID, h.Lease, h.Token)
	if err != nil {
		return Result{Err: err}
	}
	a.renewWith(j, h.LeaseTTL, h.Progress, true)
	return Result{Jobs: []*store.Job{j}, Deadline: j.LeaseDeadline, Renewed: 1, Actions: stopActions(j)}
}

// renewWith renews j's lease and, when p is set, keeps p as the attempt's
// latest progress, in one write; ack says the worker named the attempt,
// acknowledging it (ack.go).
func (a *applier) renewWith(j *store.Job, ttl int64, p *LeaseProgress, ack bool) {
	d := a.deadline(j, ttl)
	acked := ack && acknowledge(j)
	if d == j.LeaseDeadline && p == nil && !acked {
		return
	}
	prev := j.Status
	a.unindex(j)
	j.LeaseDeadline = d
	if p != nil {
		j.Progress = p.stored(a.now)
	}
	a.put(j, prev)
}

// workerHeartbeat marks a registered worker alive and renews the leases it
// says it runs (or all it holds, if it does not say), keeping the progress
// it gives for them, and tells it which of its jobs to cancel.
func (a *applier) workerHeartbeat(h *WorkerHeartbeat) Result {
	w, err := a.tx.Worker(h.WorkerID)
	if errors.Is(err, store.ErrNotFound) {
		return Result{Err: fmt.Errorf("worker %s: %w", h.WorkerID, ErrWorkerNotFound)}
	}
	a.must(err)
	if h.Token != "" && w.Owner != "" && w.Owner != h.Token {
		// Even while it is offline: only a register takes an id over.
		return Result{Err: fmt.Errorf("worker %s belongs to another token: %w", h.WorkerID, ErrForbidden)}
	}
	w.LastHeartbeat = a.now
	a.must(a.tx.PutWorker(w, a.index))
	a.f.idx.wx.set(w) // heard from again: active, if it was declared offline
	r := Result{Worker: w, Deadline: after(a.now, h.LeaseTTL)}
	var listed map[string]listedLease
	progress := h.leaseProgress()
	if h.Listed {
		listed = make(map[string]listedLease, len(h.Leases))
		for _, l := range h.Leases {
			listed[l.JobID] = listedLease{lease: l.Lease}
		}
	}
	for _, id := range a.f.idx.workerJobs(h.WorkerID) {
		j, err := a.job(id)
		if err != nil {
			continue
		}
		if l, ok := listed[id]; h.Listed && (!ok || l.lease != j.Lease) {
			if a.neverReceived(j, h) {
				a.giveBack(j)
				r.Jobs = append(r.Jobs, j)
			}
			continue // the worker does not run this attempt: let it expire
		}
		a.renewWith(j, h.LeaseTTL, progress[id], h.Listed) // listed: it names the attempt
		if h.Listed {
			listed[id] = listedLease{lease: j.Lease, renewed: true}
		}
		r.Renewed++
		r.Actions = append(r.Actions, stopActions(j)...)
	}
	if r.Renewed < len(h.Leases) { // else each listed lease was renewed
		r.Lost = a.lostLeases(h, listed)
	}
	return r
}

// listedLease is a lease a worker heartbeat listed for a job, and whether
// the heartbeat renewed it.
type listedLease struct {
	lease   uint64
	renewed bool
}

// lostLeases names, in the order h lists them, the leases h listed that
// it did not renew (listed says which it did), each with why (lostReason).
// The result is the proposer's alone: nothing of it is stored.
func (a *applier) lostLeases(h *WorkerHeartbeat, listed map[string]listedLease) []LostLease {
	var out []LostLease
	for _, l := range h.Leases {
		if got := listed[l.JobID]; got.renewed && got.lease == l.Lease {
			continue
		}
		out = append(out, LostLease{JobID: l.JobID, Lease: l.Lease, Reason: a.lostReason(l.JobID, l.Lease)})
	}
	return out
}

// lostReason says why a worker heartbeat did not renew lease of job id:
// ErrNotFound, no such job; ErrNotRunning, lease names the job's current
// attempt but that attempt ended (its lease expired and the reaper ended
// it, it was reported, or it was given back);
// ErrStaleLease, the job has moved on to another attempt since (or lease
// never was this worker's).
func (a *applier) lostReason(id string, lease uint64) error {
	j, err := a.tx.Job(id)
	if errors.Is(err, store.ErrNotFound) {
		return ErrNotFound
	}
	a.must(err)
	if lease == j.Lease && !j.Status.Leased() {
		return ErrNotRunning
	}
	return ErrStaleLease
}

// neverReceived reports whether j's running attempt, not listed in the
// heartbeat of its worker, came from one of the worker's claim requests
// that had ended when it sent the heartbeat: the claim's reply never
// reached the worker (the leader died, say), or the worker would list it.
// Claims still in flight are outside h's range, and so are those of a
// worker's earlier run, which may have received them. Gang tasks and
// cancelling jobs are left to expire.
func (a *applier) neverReceived(j *store.Job, h *WorkerHeartbeat) bool {
	return j.Status == store.StatusRunning && j.GangID == "" && j.ClaimSeq != 0 &&
		h.ClaimsFrom != 0 && h.ClaimsFrom <= j.ClaimSeq && j.ClaimSeq <= h.ClaimsTo
}

// giveBack undoes the claim of an attempt its worker never received: the
// job is pending again at once, and the attempt does not count. Its history
// keeps it as returned, so that a reader who saw it running can tell what
// became of it.
func (a *applier) giveBack(j *store.Job) {
	prev := j.Status
	a.unindex(j)
	a.endAttempt(j, store.StatusReturned, fmt.Sprintf("claim reply lost: worker %s never received it", j.WorkerID), false)
	j.Status = store.StatusPending
	j.Attempts--
	j.RunAt = min(j.RunAt, a.now)
	a.put(j, prev)
}
