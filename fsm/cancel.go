package fsm

// Cancelling a job: at once, or through cancelling while it runs; a gang
// task cancels its whole gang (gang.go).

import "github.com/workron/workron/store"

// cancel stops a job: at once if it is not running; a running job becomes
// cancelling until its worker acknowledges (its next report).
func (a *applier) cancel(c *Cancel) Result {
	j, err := a.job(c.JobID)
	if err != nil {
		return Result{Err: err}
	}
	if r, ok := a.cancelGang(j, c); ok {
		return r
	}
	prev := j.Status
	switch {
	case prev.Finished():
		return Result{Err: &StateError{JobID: j.ID, Status: string(prev), Op: "cancel"}}
	case prev == store.StatusCancelling:
		if c.Cascade {
			a.cascade(j, store.StatusCancelled)
		}
		return Result{Jobs: []*store.Job{j}}
	case prev == store.StatusRunning:
		a.unindex(j)
		j.Status = store.StatusCancelling
		a.put(j, prev)
		if c.Cascade {
			// Cascade now: the flag is not kept for the worker's report.
			a.cascade(j, store.StatusCancelled)
		}
		return Result{Jobs: []*store.Job{j}}
	}
	a.unindex(j)
	j.Status = store.StatusCancelled
	j.DoneAt = a.now
	j.LastError = "cancelled"
	a.put(j, prev)
	if c.Cascade {
		a.cascade(j, store.StatusCancelled)
	}
	return Result{Jobs: []*store.Job{j}}
}
