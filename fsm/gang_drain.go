package fsm

// Draining a gang: a task's failure (or its worker's loss) stops its
// running siblings by the drain's epoch; they acknowledge (Preempted) or
// are force-drained, get their attempt back, and the gang then waits to be
// placed again or fails as a unit.

import (
	"fmt"
	"slices"

	"github.com/workron/workron/store"
)

// preemptActions tells the worker of a running gang task to stop it while
// its gang drains.
func preemptActions(j *store.Job) []Action {
	if j.PreemptEpoch == 0 || j.Status != store.StatusRunning {
		return nil
	}
	return []Action{{JobID: j.ID, Lease: j.Lease, Action: "preempt", Epoch: j.PreemptEpoch}}
}

// gangFail is failAttempt for gang tasks; it reports whether it handled the
// end of the (unindexed) attempt. In a draining gang, any end of a running
// task is its preemption. Otherwise the failure drains the gang: the task
// waits with it, and the gang fails when the task has no attempts left.
func (a *applier) gangFail(j *store.Job, prev store.Status, e attemptEnd) bool {
	if prev == store.StatusCancelling {
		return false
	}
	g, ok := a.openGang(j)
	if !ok {
		return false
	}
	if a.gangDrained(j, prev, e.expired) {
		return true
	}
	j.LastError = e.msg
	a.endAttempt(j, store.StatusFailed, e.msg, e.expired)
	final := e.final || j.Attempts >= j.MaxAttempts
	j.Status, j.PreemptEpoch = store.StatusBlocked, 0
	a.put(j, prev)
	runAt := a.now
	if !final {
		runAt += backoffDelay(j.Backoff, j.Attempts, e.draw)
	}
	a.drain(g, j.ID, "task "+j.ID+" failed: "+e.msg, final, runAt)
	return true
}

// gangDrained ends the (unindexed) attempt of a task whose gang drains as
// its preemption, and reports whether it did.
func (a *applier) gangDrained(j *store.Job, prev store.Status, expired bool) bool {
	g, ok := a.openGang(j)
	if !ok || g.Status != store.GangDraining || !prev.Leased() {
		return false
	}
	a.endPreempted(j, prev, g, fmt.Sprintf("preempted: gang %s drained (epoch %d)", g.ID, g.Epoch), expired)
	a.endDrainIfIdle(g)
	return true
}

// drain stops a gang: running tasks are told to stop (their PreemptEpoch),
// reserved and done tasks wait again with the gang. failing names the task
// whose end caused it ("" for a lost reservation); final fails the gang when
// the drain ends; runAt is when it may be placed again.
func (a *applier) drain(g *store.Gang, failing, msg string, final bool, runAt int64) {
	g.Epoch++
	g.Status, g.DrainAt, g.Failing, g.Final, g.RunAt, g.LastError = store.GangDraining, a.now, failing, final, runAt, msg
	a.putGang(g)
	for _, t := range a.tasks(g) {
		prev := t.Status
		switch {
		case t.ID == failing:
		case prev == store.StatusRunning:
			a.unindex(t)
			t.PreemptEpoch = g.Epoch
			a.put(t, prev)
		case prev == store.StatusReserved:
			a.unindex(t)
			t.Status = store.StatusBlocked
			a.put(t, prev)
		case prev == store.StatusDone:
			// It runs again with the gang; its attempt does not count.
			t.Status, t.DoneAt, t.Attempts = store.StatusBlocked, 0, max(t.Attempts-1, 0)
			a.put(t, prev)
		}
	}
	a.endDrainIfIdle(g)
}

// endPreempted ends a running task's (unindexed) attempt as stopped for its
// gang's drain: the attempt is given back, and the task waits with the gang.
func (a *applier) endPreempted(j *store.Job, prev store.Status, g *store.Gang, msg string, expired bool) {
	a.endAttempt(j, store.StatusFailed, msg, expired)
	j.LastError = msg
	j.Attempts = max(j.Attempts-1, 0)
	j.Status, j.PreemptEpoch = store.StatusBlocked, 0
	a.put(j, prev)
}

// endDrainIfIdle ends a draining gang's drain once none of its tasks runs:
// the gang fails as a unit when it is final, else it waits to be placed.
func (a *applier) endDrainIfIdle(g *store.Gang) {
	if g.Status != store.GangDraining {
		return
	}
	tasks := a.tasks(g)
	if slices.ContainsFunc(tasks, func(t *store.Job) bool { return t.Status.Leased() }) {
		return
	}
	g.Workers = nil
	if !g.Final {
		g.Status = store.GangBlocked
		a.putGang(g)
		return
	}
	g.Status, g.DoneAt = store.GangFailed, a.now
	a.putGang(g)
	for _, t := range tasks {
		prev := t.Status
		if t.ID != g.Failing {
			t.LastError = "gang " + g.ID + " failed: " + g.LastError
		}
		t.Status, t.DoneAt = store.StatusFailed, a.now
		a.put(t, prev)
		a.must(a.tx.DeleteCheckpoint(t.ID))
		a.cascade(t, store.StatusFailed)
	}
}

// forceDrain ends a drain whose tasks did not all acknowledge in time:
// their attempts end as expired preemptions.
func (a *applier) forceDrain(r *GangRef) Result {
	g, err := a.gangAt(r, store.GangDraining, "force drain of")
	if err != nil {
		return Result{Err: err}
	}
	msg := fmt.Sprintf("force-drained: preemption of epoch %d not acknowledged in time", g.Epoch)
	for _, t := range a.tasks(g) {
		if prev := t.Status; prev.Leased() {
			a.unindex(t)
			t.ExitCode = nil
			a.endPreempted(t, prev, g, msg, true)
		}
	}
	a.endDrainIfIdle(g)
	return Result{Gang: g, Jobs: a.tasks(g)}
}

// drainingTask loads a task whose preemption of epoch is pending, for the
// token (name) that claimed its attempt (see claimedBy).
func (a *applier) drainingTask(id string, epoch uint64, token, what string) (*store.Job, *store.Gang, error) {
	j, err := a.job(id)
	if err != nil {
		return nil, nil, err
	}
	if j.GangID == "" {
		return nil, nil, fmt.Errorf("%s for job %s: it is not a gang task: %w", what, id, ErrConflict)
	}
	if j.Status.Leased() {
		if err := claimedBy(j, token); err != nil {
			return nil, nil, err
		}
	}
	g, err := a.gang(j.GangID)
	if err != nil {
		return nil, nil, err
	}
	if g.Status != store.GangDraining || g.Epoch != epoch || j.PreemptEpoch != epoch || !j.Status.Leased() {
		return nil, nil, fmt.Errorf("%s for job %s at epoch %d: no such preemption is pending (gang %s is %s at epoch %d): %w",
			what, id, epoch, g.ID, g.Status, g.Epoch, ErrStaleEpoch)
	}
	return j, g, nil
}

// preempted acknowledges a task's preemption: its attempt ends, given
// back, and the drain ends once no task runs.
func (a *applier) preempted(p *Preempted) Result {
	j, g, err := a.drainingTask(p.JobID, p.Epoch, p.Token, "preemption acknowledgement")
	if err != nil {
		return Result{Err: err}
	}
	prev := j.Status
	a.unindex(j)
	a.endPreempted(j, prev, g, fmt.Sprintf("preempted: gang %s drained (epoch %d)", g.ID, g.Epoch), false)
	a.endDrainIfIdle(g)
	return Result{Jobs: []*store.Job{j}, Gang: g}
}
