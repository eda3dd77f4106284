package fsm

import (
	"fmt"

	"github.com/workron/workron/store"
)

// claim leases up to c.Max ready jobs to the worker, within c.MaxBytes
// (claim_bytes.go). The lease (the fencing token that later reports must
// present) is this entry's Raft index: unique and increasing across the
// cluster, so no two attempts ever share one.
func (a *applier) claim(c *Claim) Result {
	if c.WorkerID == "" {
		return Result{Err: &ValidationError{Field: "worker_id", Reason: "must not be empty"}}
	}
	if c.LeaseTTL <= 0 {
		// A lease that is born expired could be reaped and re-claimed
		// within one entry, and two attempts would share a token.
		return Result{Err: &ValidationError{Field: "lease_ttl", Reason: "must be positive"}}
	}
	if err := a.mayActAs(c.WorkerID, c.Token); err != nil {
		return Result{Err: err}
	}
	if err := a.admitWorker(c.WorkerID, c.Token, c.MaxWorkers); err != nil {
		return Result{Err: fmt.Errorf("claim as worker %s: %w", c.WorkerID, err)}
	}
	n := min(max(c.Max, 1), MaxClaim)
	a.f.idx.promote(a.now)
	a.deletePauses(a.f.idx.reopen(a.now))
	kinds := claimKinds(c.Queues, c.Types, c.Shell)
	out := a.claimReserved(c, n)
	var used int64 // claimBytes of out, against c.MaxBytes
	for _, j := range out {
		used += claimBytes(j)
	}
	fit := a.f.idx.fitOf(c.WorkerID)
	for len(out) < n {
		it, ok := a.f.idx.pick(kinds, fit, c.Fair)
		if !ok {
			break
		}
		q := a.f.idx.queueOf(it)
		turn := c.Fair && a.f.idx.hasKeys(kindsOf(kinds, q))
		j, err := a.job(a.f.idx.idOf(it))
		if err != nil {
			// The index names a job the store lacks: drop the stray entry.
			a.f.idx.removeReady(it)
			continue
		}
		if c.MaxBytes > 0 && len(out) > 0 && used+claimBytes(j) > c.MaxBytes {
			break // the reply is full: the job stays pending
		}
		if !a.takeTokens(it) {
			continue // its queue or key is out of tokens, and now closed
		}
		if turn {
			a.turn(q, a.f.idx.keyOf(it))
		}
		a.noteHeld(it, j.ID)
		j.WorkerID = c.WorkerID
		a.startAttempt(j, c)
		out = append(out, j)
		used += claimBytes(j)
	}
	if len(out) > 0 {
		a.touchWorker(c.WorkerID, c.Queues, c.Token)
	}
	return Result{Jobs: out}
}

// kindsOf is the kinds of queue q among a claim's.
func kindsOf(kinds [][]kind, q string) []kind {
	for _, ks := range kinds {
		if len(ks) > 0 && ks[0].queue == q {
			return ks
		}
	}
	return nil
}

// startAttempt leases a job of the worker's (pending, or reserved for it)
// to it: a new attempt, whose lease is the next fencing token, recording
// how it was claimed.
func (a *applier) startAttempt(j *store.Job, c *Claim) {
	prev := j.Status
	a.unindex(j)
	j.Status = store.StatusRunning
	j.Attempts++
	var err error
	j.Lease, err = a.tx.NextLease(a.index)
	a.must(err)
	j.StartedAt = a.now
	j.DoneAt = 0
	j.ExitCode = nil
	j.Progress = nil // a new attempt has reported none yet
	j.LeaseDeadline = a.deadline(j, c.LeaseTTL)
	j.ClaimToken, j.Fenced, j.ClaimSeq = c.Token, c.Fenced, c.Seq
	j.AwaitingAck = c.Ack && j.GangID == "" // see ack.go
	a.put(j, prev)
	a.claimedParked(j)
}

// deadline is when a running job's lease runs out if not renewed: ttl from
// now, but never past its timeout plus TimeoutMargin.
func (a *applier) deadline(j *store.Job, ttl int64) int64 {
	d := after(a.now, ttl)
	if j.Timeout > 0 {
		if limit := after(after(j.StartedAt, j.Timeout), int64(TimeoutMargin)); d > limit {
			d = limit
		}
	}
	return d
}

// pauseQueue stops or restarts claims from a queue.
func (a *applier) pauseQueue(p *PauseQueue) Result {
	if p.Name == "" {
		return Result{Err: &ValidationError{Field: "name", Reason: "must not be empty"}}
	}
	a.must(a.tx.SetQueuePaused(p.Name, p.Paused))
	if p.Paused {
		a.f.idx.paused[p.Name] = true
	} else {
		delete(a.f.idx.paused, p.Name)
		a.readyChanged = true
	}
	return Result{}
}
