package fsm

import (
	"errors"
	"fmt"

	"github.com/workron/workron/store"
)

// report ends the current attempt with the worker's outcome. A report that
// repeats one already applied for the same lease (a retry after an unknown
// outcome) gets the job back and changes nothing.
func (a *applier) report(r *Report) Result {
	if err := checkBackpressure(r); err != nil {
		return Result{Err: err}
	}
	j, err := a.ownAttempt(r.JobID, r.Lease, r.Token)
	if err != nil {
		if !errors.Is(err, ErrForbidden) && a.alreadyReported(r) {
			done, _ := a.job(r.JobID)
			return Result{Jobs: []*store.Job{done}}
		}
		return Result{Err: err}
	}
	if err := checkResult(r.Result); err != nil {
		return Result{Err: err}
	}
	prev := j.Status
	a.unindex(j)
	if len(r.Result) > 0 {
		j.Result = r.Result
	}
	if r.Progress != nil {
		j.Progress = r.Progress.stored(a.now)
	}
	j.ExitCode = r.ExitCode
	j.Output = tail(r.Output, MaxOutput)
	if r.Success {
		if a.gangDrained(j, prev, false) {
			return Result{Jobs: []*store.Job{j}}
		}
		a.endAttempt(j, store.StatusDone, "", false)
		j.Status = store.StatusDone
		j.DoneAt = a.now
		j.LastError = ""
		a.put(j, prev)
		a.jobDone(j)
		return Result{Jobs: []*store.Job{j}}
	}
	msg := r.Error
	if msg == "" {
		msg = "failed"
		if r.ExitCode != nil {
			msg = fmt.Sprintf("exit status %d", *r.ExitCode)
		}
	}
	held, msg := a.holdOff(j, prev, r, tail(msg, MaxOutput))
	if held {
		return Result{Jobs: []*store.Job{j}}
	}
	a.failAttempt(j, prev, attemptEnd{msg: tail(msg, MaxOutput), final: r.Final, draw: r.Draw})
	return Result{Jobs: []*store.Job{j}}
}

// alreadyReported reports whether the job's history holds the attempt of
// r.Lease ended the way r says: done for a success, not done for a failure.
func (a *applier) alreadyReported(r *Report) bool {
	if r.Lease == 0 {
		return false
	}
	j, err := a.job(r.JobID)
	if err != nil {
		return false
	}
	if r.Lease == j.Lease && claimedBy(j, r.Token) != nil {
		return false // the last attempt's result is for the token that claimed it
	}
	for _, at := range j.History {
		if at.Lease == r.Lease {
			return (at.Status == store.StatusDone) == r.Success && !at.Expired && at.Status != store.StatusReturned && at.Status != store.StatusParked
		}
	}
	return false
}

// expire ends an attempt whose lease deadline has passed, unless a heartbeat
// or report got there first (then the lease or deadline no longer match).
func (a *applier) expire(e *Expire) Result {
	j, err := a.currentAttempt(e.JobID, e.Lease)
	if err != nil {
		return Result{Err: err}
	}
	if j.LeaseDeadline > a.now {
		return Result{Err: fmt.Errorf("job %s lease %d renewed until %d: %w", j.ID, j.Lease, j.LeaseDeadline, ErrConflict)}
	}
	msg := fmt.Sprintf("lease expired: worker %s stopped heartbeating", j.WorkerID)
	if j.Timeout > 0 && a.now >= after(j.StartedAt, j.Timeout) {
		msg = "timed out after " + durationString(j.Timeout)
	}
	prev := j.Status
	a.unindex(j)
	j.ExitCode = nil
	a.failAttempt(j, prev, attemptEnd{msg: msg, draw: e.Draw, expired: true})
	return Result{Jobs: []*store.Job{j}}
}

// attemptEnd says how a failed attempt ended: its error, whether retries are
// skipped, the jitter draw, and whether the reaper (not the worker) ended it.
type attemptEnd struct {
	msg     string
	final   bool
	draw    float64
	expired bool
}

// failAttempt ends a failed attempt of an unindexed job: a cancelling job is
// cancelled; one with attempts left waits out its backoff; others fail. An
// expiry of an attempt its worker never acknowledged may not count (ack.go).
func (a *applier) failAttempt(j *store.Job, prev store.Status, e attemptEnd) {
	if a.returnUnacked(j, prev, e) || a.gangFail(j, prev, e) {
		return
	}
	msg := e.msg
	j.LastError = msg
	switch {
	case prev == store.StatusCancelling:
		// Dependents were cancelled with it if the cancel asked for that.
		a.endAttempt(j, store.StatusCancelled, msg, e.expired)
		j.Status = store.StatusCancelled
		j.DoneAt = a.now
		a.put(j, prev)
	case !e.final && j.Attempts < j.MaxAttempts:
		a.endAttempt(j, store.StatusFailed, msg, e.expired)
		j.Status = store.StatusPending
		j.RunAt = after(a.now, backoffDelay(j.Backoff, j.Attempts, e.draw))
		a.put(j, prev)
	default:
		a.endAttempt(j, store.StatusFailed, msg, e.expired)
		j.Status = store.StatusFailed
		j.DoneAt = a.now
		a.put(j, prev)
		a.cascade(j, store.StatusFailed)
	}
}

// endAttempt records the current attempt in the history and drops its lease.
func (a *applier) endAttempt(j *store.Job, st store.Status, msg string, expired bool) {
	j.History = append(j.History, store.Attempt{
		Attempt:  j.Attempts,
		WorkerID: j.WorkerID,
		Lease:    j.Lease,
		Status:   st,
		ExitCode: j.ExitCode,
		Error:    msg,
		Started:  j.StartedAt,
		Ended:    a.now,
		Expired:  expired,
	})
	if len(j.History) > MaxHistory {
		j.History = j.History[len(j.History)-MaxHistory:]
	}
	j.LeaseDeadline = 0
	j.AwaitingAck = false
}

// retry re-queues a failed or cancelled job with a fresh attempt budget.
func (a *applier) retry(r *Retry) Result {
	j, err := a.job(r.JobID)
	if err != nil {
		return Result{Err: err}
	}
	if res, ok := a.retryGang(j, r.Dependents); ok {
		return res
	}
	prev := j.Status
	if prev != store.StatusFailed && prev != store.StatusCancelled {
		return Result{Err: &StateError{JobID: j.ID, Status: string(prev), Op: "retry"}}
	}
	j.Attempts = 0
	j.DoneAt = 0
	j.RunAt = a.now
	j.Status = store.StatusPending
	j.Waiting = a.waitingOn(j)
	if j.Waiting > 0 {
		j.Status = store.StatusBlocked
	}
	a.put(j, prev)
	res := Result{Jobs: []*store.Job{j}}
	if r.Dependents {
		res.Jobs = append(res.Jobs, a.reviveDependents(j)...)
	}
	return res
}

// jobDone follows a job's success, once it is stored done: a plain job's
// dependents are unblocked at once, a gang task's when its gang's last task
// is done (gangTaskDone).
func (a *applier) jobDone(j *store.Job) {
	if !a.gangTaskDone(j) {
		a.unblockDependents(j, false)
	}
}
