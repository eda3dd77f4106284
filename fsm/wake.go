package fsm

import (
	"encoding/json"
	"errors"

	"github.com/workron/workron/store"
)

// What wakes a parked job (durable.go): an event or signal, a child that
// ends, the claim that takes a wait past its deadline; and what a parked
// job that ends leaves behind.

// sendEvent applies a SendEvent: expire what left the look-back window
// (a bounded number), keep the event, and wake the jobs waiting on its
// channel (at most MaxWaitersPerKey).
func (a *applier) sendEvent(e *SendEvent) Result {
	if err := e.check(); err != nil {
		return Result{Err: err}
	}
	ch := store.Channel{Name: e.Name, Key: e.Key}
	if e.Signal {
		if _, err := a.job(e.JobID); err != nil {
			return Result{Err: err}
		}
		ch = store.Channel{Signal: true, Name: e.Name, Key: e.JobID}
	}
	_, err := a.tx.ExpireEvents(after(a.now, -EventLookBack), maxExpirePerApply)
	a.must(err)
	tot := a.tx.EventTotals()
	if tot.Count >= MaxKeptEvents {
		return Result{Err: &LimitError{Limit: "max_kept_events", Have: int64(tot.Count), Max: MaxKeptEvents}}
	}
	if tot.Bytes+store.EventBytes(ch, e.Payload) > MaxKeptEventBytes {
		return Result{Err: &LimitError{Limit: "max_kept_event_bytes", Have: tot.Bytes, Max: MaxKeptEventBytes}}
	}
	ev := &store.Event{Chan: ch, At: a.now, Payload: e.Payload}
	a.must(a.tx.PutEvent(ev))
	woke := 0
	for _, w := range a.tx.WaitersOf(ch, MaxWaitersPerKey) {
		if a.deliver(ch, w, ev) {
			woke++
		}
	}
	return Result{Seq: ev.Seq, Woke: woke}
}

// deliver gives event ev to waiter w of channel ch, and reports whether
// it woke it: a wait whose deadline the entry's time reached times out
// instead (and leaves the event to others).
func (a *applier) deliver(ch store.Channel, w store.Waiter, ev *store.Event) bool {
	a.must(a.tx.DeleteWaiter(ch, w.JobID))
	st, err := a.tx.Step(w.JobID, w.Step)
	if errors.Is(err, store.ErrNotFound) {
		return false
	}
	a.must(err)
	if st.Status != store.StepWaiting {
		return false
	}
	if st.WakeAt != 0 && a.now >= st.WakeAt {
		ev = nil
	}
	a.resolve(w.JobID, st, a.outcome(w.JobID, st, ev))
	return ev != nil
}

// resolve records out in place of step old of job jobID, and wakes the
// job if it was parked on it: pending from now.
func (a *applier) resolve(jobID string, old, out *store.Step) {
	a.must(a.tx.ReplaceStep(jobID, old, out))
	p, err := a.tx.Park(jobID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && p.Step != old.Key) {
		return
	}
	a.must(err)
	a.must(a.tx.DeletePark(jobID))
	j, err := a.job(jobID)
	if err != nil || j.Status != store.StatusPending || j.RunAt <= a.now {
		return
	}
	a.unindex(j)
	j.RunAt = a.now
	a.put(j, j.Status)
}

// claimedParked follows the claim of job j: a sleep's park is over; a
// wait past its deadline times out (the log's clock decides, once); a
// wait or invoke still waiting stays registered, and the attempt re-parks
// when it replays to it.
func (a *applier) claimedParked(j *store.Job) {
	p, err := a.tx.Park(j.ID)
	if errors.Is(err, store.ErrNotFound) {
		return
	}
	a.must(err)
	switch p.Kind {
	case store.StepSleep:
		a.must(a.tx.DeletePark(j.ID))
	case store.StepWait:
		if p.WakeAt == 0 || a.now < p.WakeAt {
			return
		}
		if p.Chan != nil {
			a.must(a.tx.DeleteWaiter(*p.Chan, j.ID))
		}
		a.must(a.tx.DeletePark(j.ID))
		st, err := a.tx.Step(j.ID, p.Step)
		if err == nil && st.Status == store.StepWaiting {
			a.must(a.tx.ReplaceStep(j.ID, st, a.outcome(j.ID, st, nil)))
		}
	}
}

// durableEnded follows a job that reached a final status: its park and
// wait go, and a parent waiting on it as a child is given its outcome.
func (a *applier) durableEnded(j *store.Job) {
	if p, err := a.tx.Park(j.ID); err == nil {
		if p.Chan != nil {
			a.must(a.tx.DeleteWaiter(*p.Chan, j.ID))
		}
		a.must(a.tx.DeletePark(j.ID))
	} else if !errors.Is(err, store.ErrNotFound) {
		a.must(err)
	}
	parent, key, ok := a.tx.ChildOf(j.ID)
	if !ok {
		return
	}
	a.must(a.tx.DeleteChild(j.ID))
	st, err := a.tx.Step(parent, key)
	if err != nil || st.Status != store.StepWaiting || st.ChildID != j.ID {
		return
	}
	a.resolve(parent, st, a.childOutcome(st, j))
}

// childOutcome is invoke step st once its child j ended: ok with the
// child's result, or failed with {status, error}.
func (a *applier) childOutcome(st *store.Step, j *store.Job) *store.Step {
	out := *st
	out.RecordedAt = a.now
	out.Status = store.StepOK
	out.Result = nil
	if j.Status != store.StatusDone {
		out.Status = store.StepFailed
		b, err := json.Marshal(struct {
			Status string `json:"status"`
			Error  string `json:"error"`
		}{string(j.Status), tail(j.LastError, MaxOutput)})
		a.must(err)
		out.Result = b
	} else if len(j.Result) > 0 && string(j.Result) != "null" {
		out.Result = j.Result
	}
	out.Size = len(out.Result)
	return &out
}

// invokeStep applies an InvokeStep: submit the child once, record the
// step waiting on it, park the parent (or record the outcome at once, if
// the child already ended).
func (a *applier) invokeStep(v *InvokeStep) Result {
	if err := checkParking(v.JobID, v.Lease, v.Key); err != nil {
		return Result{Err: err}
	}
	j, old, res := a.parkingAttempt(v.JobID, v.Lease, v.Token, v.Key, store.StepInvoke)
	if j == nil {
		return res
	}
	if old != nil && old.Status != store.StepWaiting {
		return a.recorded(j, old)
	}
	st := old
	if st == nil {
		if err := a.journalRoom(j, v.Key, MaxResultBytes+MaxOutput+64); err != nil {
			return Result{Err: err}
		}
		if v.Child.IdempotencyKey != "" {
			if holder, err := a.keyHolder(v.Child.IdempotencyKey); err != nil {
				return Result{Err: err}
			} else if holder != nil && holder.ID == j.ID {
				return Result{Err: &ValidationError{Field: "job.idempotency_key", Reason: "names the invoking job itself: it would wait for itself"}}
			}
		}
		sub := a.submit(&Submit{Jobs: []NewJob{v.Child}})
		if sub.Err != nil {
			return sub
		}
		st = a.newStep(j, v.Key, store.StepInvoke, store.StepWaiting)
		st.ChildID = sub.Jobs[0].ID
		a.must(a.tx.PutStep(j.ID, st))
	}
	child, err := a.job(st.ChildID)
	if err != nil || child.Status.Finished() {
		if err != nil { // deleted: it ended long ago
			child = &store.Job{ID: st.ChildID, Status: store.StatusCancelled, LastError: "the child job was deleted"}
		}
		out := a.childOutcome(st, child)
		a.must(a.tx.ReplaceStep(j.ID, st, out))
		return Result{Jobs: []*store.Job{j}, Step: out}
	}
	a.must(a.tx.PutChild(child.ID, j.ID, st.Key))
	a.park(j, a.wakeAt(0), &store.Park{Kind: store.StepInvoke, Step: st.Key, ChildID: child.ID})
	return Result{Jobs: []*store.Job{j, child}, Step: st, Parked: true}
}

// Park returns what job jobID is parked on, nil if it is not: a pending
// job with a park (a running job's park waits for its replay).
func (f *FSM) Park(jobID string) (*store.Park, error) {
	var p *store.Park
	err := f.view(func(tx *store.Tx) error {
		j, err := tx.Job(jobID)
		if err != nil || j.Status != store.StatusPending {
			return nil
		}
		p, err = tx.Park(jobID)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		// A park outlives its attempt only while its step waits (a wait
		// or invoke the job's next attempt replays to).
		if p.Kind == store.StepSleep && p.WakeAt != j.RunAt {
			p = nil
		} else if st, err := tx.Step(jobID, p.Step); p.Kind != store.StepSleep && (err != nil || st.Status != store.StepWaiting) {
			p = nil
		}
		return nil
	})
	return p, err
}
