package fsm

// Dependencies. A job that depends on others is created blocked, Waiting
// for those not done (submit.go), and its edges are keys in the store
// (store/deps.go). When a dependency is done it is counted off; when one
// fails or is cancelled, its blocked dependents end with it (cascade),
// transitively; a retry with dependents revives what the cascade ended.
// A schedule's run queued after the previous one is a dependency edge too
// (schedule.go: queueAfter).

import (
	"strconv"
	"strings"

	"github.com/workron/workron/store"
)

// unblockDependents counts j, just finished, off each blocked job that
// waits for it, and makes those with nothing left to wait for pending. With
// queuedOnly it counts j off only the schedule run queued after it (see
// queueAfter), which waits for j however j ended; otherwise j is done, and
// every dependent counts it.
func (a *applier) unblockDependents(j *store.Job, queuedOnly bool) {
	for _, id := range a.tx.Dependents(j.Seq) {
		d, err := a.job(id)
		if err != nil || d.Status != store.StatusBlocked || (queuedOnly && d.After != j.ID) {
			continue
		}
		d.Waiting--
		if d.Waiting <= 0 {
			d.Waiting = 0
			d.Status = store.StatusPending
			d.RunAt = max(d.RunAt, a.now)
		}
		a.put(d, store.StatusBlocked)
	}
}

// cascade ends the blocked dependents of a job that will never be done,
// transitively: they fail (or are cancelled) naming the dependency. A
// command of ProtocolCascade starts it in chunks instead (cascade.go).
func (a *applier) cascade(j *store.Job, st store.Status) {
	if a.chunked {
		if a.tx.DependentCount(j.Seq) > 0 {
			kind := store.CascadeCancel
			if st == store.StatusFailed {
				kind = store.CascadeFail
			}
			a.startCascade(kind, j)
		}
		return
	}
	a.walkDependents(j, func(p, d *store.Job) bool {
		return a.endDependent(d, p.ID, p.Status, st, a.now)
	})
}

// endDependent ends d, a blocked dependent of parent (which ended as
// parentStatus), as st at time now, and reports whether it did: the one
// step of a cancel or failure cascade, whether in one entry or in chunks.
func (a *applier) endDependent(d *store.Job, parent string, parentStatus, st store.Status, now int64) bool {
	if d.Status != store.StatusBlocked {
		return false
	}
	d.Status = st
	d.DoneAt = now
	d.LastError = cascadePrefix(parent) + string(parentStatus)
	a.put(d, store.StatusBlocked)
	return true
}

// reviveDependent makes d, a dependent of parent that a cascade ended,
// blocked again (or pending when it waits on nothing) as of now, and
// reports whether it did: the one step of a revive, in one entry or in
// chunks.
func (a *applier) reviveDependent(d *store.Job, parent string, now int64) bool {
	if !a.revivable(d, parent) {
		return false
	}
	prev := d.Status
	d.DoneAt, d.LastError, d.RunAt = 0, "", max(d.RunAt, now)
	d.Waiting = a.waitingOn(d)
	d.Status = store.StatusBlocked
	if d.Waiting == 0 {
		d.Status = store.StatusPending
	}
	a.put(d, prev)
	return true
}

// cascadePrefix starts the error of a job that cascade ended because of
// the job id; reviveDependents recognises its victims by it.
func cascadePrefix(id string) string { return "dependency " + id + " " }

// reviveDependents undoes the cascades that ended j's dependents, after j
// was retried: each dependent that never ran and was ended naming its
// dependency is blocked again (or pending if nothing is left to wait for),
// and so on down the graph. A dependent that also depends on another job
// that failed or was cancelled stays as it is, and so do gang tasks, whose
// gang decides their fate. A retried gang revives the dependents of each of
// its tasks. A command of ProtocolCascade starts it in chunks instead
// (cascade.go), and returns the first chunk's jobs.
func (a *applier) reviveDependents(j *store.Job) []*store.Job {
	if a.chunked {
		if a.tx.DependentCount(j.Seq) == 0 {
			return nil
		}
		return a.startCascade(store.CascadeRevive, j)
	}
	var out []*store.Job
	a.walkDependents(j, func(p, d *store.Job) bool {
		if !a.reviveDependent(d, p.ID, a.now) {
			return false
		}
		out = append(out, d)
		return true
	})
	return out
}

// walkDependents visits j's dependents breadth first, down the graph:
// change gets each with the job it was reached from, and the walk goes on
// below the ones it changed.
func (a *applier) walkDependents(j *store.Job, change func(parent, d *store.Job) bool) {
	queue := []*store.Job{j}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, id := range a.tx.Dependents(p.Seq) {
			if d, err := a.job(id); err == nil && change(p, d) {
				queue = append(queue, d)
			}
		}
	}
}

// revivable reports whether d was ended by the cascade from its dependency
// parent and nothing else keeps it ended.
func (a *applier) revivable(d *store.Job, parent string) bool {
	if d.Attempts != 0 || d.GangID != "" || (d.Status != store.StatusFailed && d.Status != store.StatusCancelled) ||
		!strings.HasPrefix(d.LastError, cascadePrefix(parent)) {
		return false
	}
	for _, id := range d.DependsOn {
		if dep, err := a.tx.JobHead(id); err == nil && (dep.Status == store.StatusFailed || dep.Status == store.StatusCancelled) {
			return false
		}
	}
	return true
}

// waitingOn counts j's dependencies that are not done.
func (a *applier) waitingOn(j *store.Job) int {
	n := 0
	for _, id := range j.DependsOn {
		if d, err := a.tx.JobHead(id); err == nil && d.Status != store.StatusDone {
			n++
		}
	}
	return n
}

// CheckBatchCycles refuses a batch whose "$N" references form a cycle. The
// API runs it before proposing; submit runs it again when it applies.
// Existing jobs cannot depend on new ones, so cycles can only lie inside.
func CheckBatchCycles(jobs []NewJob) error {
	const (
		unseen = iota
		onPath
		finished
	)
	state := make([]int, len(jobs))
	var visit func(i int, path []int) error
	visit = func(i int, path []int) error {
		state[i] = onPath
		path = append(path, i)
		for _, d := range jobs[i].DependsOn {
			n, ok := batchRef(d)
			if !ok || n < 0 || n >= len(jobs) {
				continue
			}
			switch state[n] {
			case onPath:
				return &ValidationError{Field: "depends_on", Reason: "dependency cycle " + cycleString(append(path, n), n)}
			case unseen:
				if err := visit(n, path); err != nil {
					return err
				}
			}
		}
		state[i] = finished
		return nil
	}
	path := make([]int, 0, 16) // one buffer for the walks from every root
	for i := range jobs {
		if state[i] == unseen {
			if err := visit(i, path[:0]); err != nil {
				return err
			}
		}
	}
	return nil
}

func cycleString(path []int, start int) string {
	var parts []string
	in := false
	for _, p := range path {
		if p == start {
			in = true
		}
		if in {
			parts = append(parts, "$"+strconv.Itoa(p))
		}
	}
	return strings.Join(parts, " -> ")
}
