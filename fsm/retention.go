package fsm

// Retention: a finished job with a retention is deleted that long after
// it finished (a gang's tasks once the gang finishes); the leader's sweeper
// proposes Delete for the ids FSM.ExpiredJobs lists.

import "github.com/workron/workron/store"

// expiry keeps a job's place in the retention index: a finished job with a
// retention expires that long after it finished; others never do.
func (a *applier) expiry(j *store.Job) {
	var at int64
	if j.Status.Finished() && j.Retention > 0 && !a.inOpenGang(j) {
		at = after(j.DoneAt, j.Retention)
	}
	if at != j.ExpireAt {
		a.must(a.tx.SetExpiry(j, at))
	}
}

// deleteJobs removes finished jobs whose retention ran out, and frees their
// idempotency keys unless unique_for still holds them.
func (a *applier) deleteJobs(d *Delete) Result {
	var r Result
	for _, id := range d.IDs {
		j, err := a.tx.Job(id)
		if err != nil || !j.Status.Finished() || j.ExpireAt == 0 || j.ExpireAt > a.now {
			continue
		}
		a.must(a.tx.DeleteJob(j))
		a.forgetGangTask(j)
		a.f.idx.count(j.Queue, j.Status, "")
		if j.IdempotencyKey != "" {
			if kid, until, err := a.tx.IdempotencyKey(j.IdempotencyKey); err == nil && kid == j.ID && until <= a.now {
				a.must(a.tx.DeleteIdempotencyKey(j.IdempotencyKey))
			}
		}
		r.Deleted++
	}
	return r
}
