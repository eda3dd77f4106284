package fsm

// Retention: a finished job with a retention is deleted that long after
// it finished (a gang's tasks once the gang finishes); the leader's sweeper
// proposes Delete for the ids FSM.ExpiredJobs lists.
//
// Failed and cancelled jobs are kept longer than done ones by default
// (issue #32): a job's Retention, stamped at submit, is how long it is kept
// once done, and a sweep of protocol 4 (op delete_kept) carries the
// leader's KeepFailed, the least time a failed or cancelled job is kept.
// Such a job whose retention ran out before that is not deleted: its
// expiry moves to DoneAt+KeepFailed. The floor travels in the entry, so
// every replica applies the same one whatever its own flags say.

import (
	"fmt"

	"github.com/workron/workron/store"
)

// ProtocolKeepFailed is the protocol of a Delete's KeepFailed.
const ProtocolKeepFailed = 4

// deleteKept is the op name Encode writes a delete whose KeepFailed is set
// under, so that a node of an older protocol stops at it rather than
// delete failed jobs its peers keep.
const deleteKept Op = "delete_kept"

// kept reports whether c is a delete with a floor (ProtocolKeepFailed).
func (c *Cmd) kept() bool { return c.Op == OpDelete && c.Delete != nil && c.Delete.KeepFailed != 0 }

// deleteCmd reads a delete written under either name back as OpDelete,
// and refuses a floor under the plain name (an older node would drop it)
// or the new name without one.
func (r *entryReader) deleteCmd(c *Cmd) {
	name := c.Op
	c.Op = OpDelete
	switch {
	case c.Delete == nil:
		return // Cmd.valid refuses it
	case name == OpDelete && c.kept():
		r.Fail(fmt.Sprintf("op %q with keep_failed, not written under %q", name, deleteKept))
	case name == deleteKept && !c.kept():
		r.Fail(fmt.Sprintf("op %q without keep_failed", name))
	}
}

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
// idempotency keys unless unique_for still holds them. A failed or
// cancelled job finished less than d.KeepFailed ago is kept: its expiry
// moves to the end of that floor.
//
// A delete stops before a job whose journal of durable steps (steps.go)
// would take the steps it deleted past maxDeleteStepKeys, having deleted at
// least one: a job's journal is deleted with it, key by key, and 1,000 jobs
// of 10,000 steps would make one entry's apply delete ten million keys. It
// only counts journals, which exist only once every node runs
// ProtocolSteps, so a delete of jobs without one applies as before.
func (a *applier) deleteJobs(d *Delete) Result {
	var r Result
	spent := 0
	for _, id := range d.IDs {
		j, err := a.tx.Job(id)
		if err != nil || !j.Status.Finished() || j.ExpireAt == 0 || j.ExpireAt > a.now {
			continue
		}
		if keep := a.keptUntil(j, d.KeepFailed); keep > a.now {
			a.must(a.tx.SetExpiry(j, keep))
			a.must(a.tx.UpdateJob(j, j.Status, a.index))
			r.Kept++
			continue
		}
		if steps := a.tx.Journal(j.ID).Steps; steps > 0 {
			if spent > 0 && spent+steps > maxDeleteStepKeys {
				break // the rest stay expired, for the next delete
			}
			spent += steps
		}
		a.removeJob(j)
		r.Deleted++
	}
	return r
}

// keptUntil is when the floor keepFailed lets a failed or cancelled job go
// (0 for a done job, or no floor).
func (a *applier) keptUntil(j *store.Job, keepFailed int64) int64 {
	if keepFailed <= 0 || j.Status == store.StatusDone {
		return 0
	}
	return after(j.DoneAt, keepFailed)
}

// deleteJob is a bulk delete's (bulk.go): it removes a finished job, whatever
// its retention, unless it is a task of a gang still open; a job that does
// not qualify gets a *StateError and stays.
func (a *applier) deleteJob(j *store.Job) error {
	switch {
	case !j.Status.Finished():
		return &StateError{JobID: j.ID, Status: string(j.Status), Op: "delete"}
	case a.inOpenGang(j):
		return &StateError{JobID: j.ID, Status: "a task of an open gang", Op: "delete"}
	}
	a.removeJob(j)
	return nil
}

// removeJob deletes a finished job and what it leaves (its checkpoint, its
// gang's record once no task is left, its count), and frees its
// idempotency key unless unique_for still holds it: the one rule of
// removing a job, for the sweeper's deletes and a bulk delete's.
func (a *applier) removeJob(j *store.Job) {
	a.must(a.tx.DeleteJob(j))
	a.forgetGangTask(j)
	a.f.idx.count(j.Queue, j.Status, "")
	if j.IdempotencyKey != "" {
		if kid, until, err := a.tx.IdempotencyKey(j.IdempotencyKey); err == nil && kid == j.ID && until <= a.now {
			a.must(a.tx.DeleteIdempotencyKey(j.IdempotencyKey))
		}
	}
}
