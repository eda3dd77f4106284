package fsm

// Placing a gang: the reservation of all its tasks or none (re-checking
// each worker's free capacity and tags), the claims of reserved tasks, and
// the roll-back of a reservation that was not claimed in time.

import (
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/workron/workron/store"
)

// reserveGang places a blocked gang on the leader's workers (see
// ReserveGang): every task is reserved, or none.
func (a *applier) reserveGang(r *ReserveGang) Result {
	g, err := a.gang(r.GangID)
	if err != nil {
		return Result{Err: err}
	}
	switch {
	case g.Status != store.GangBlocked || g.Epoch != r.Epoch:
		return Result{Err: fmt.Errorf("reserve gang %s at epoch %d: it is %s at epoch %d: %w", g.ID, r.Epoch, g.Status, g.Epoch, ErrStaleEpoch)}
	case g.RunAt > a.now:
		return Result{Err: fmt.Errorf("reserve gang %s: not due before %d: %w", g.ID, g.RunAt, ErrConflict)}
	case len(r.Workers) != g.Size:
		return Result{Err: &ValidationError{Field: "workers", Reason: fmt.Sprintf("gang %s has %d tasks, got %d workers", g.ID, g.Size, len(r.Workers))}}
	}
	tasks := a.tasks(g)
	if len(tasks) != g.Size {
		return Result{Err: fmt.Errorf("reserve gang %s: %d of its %d tasks exist: %w", g.ID, len(tasks), g.Size, ErrConflict)}
	}
	for i, wid := range r.Workers {
		if slices.Contains(r.Workers[:i], wid) {
			return Result{Err: &ValidationError{Field: "workers", Reason: "worker " + wid + " is named twice"}}
		}
		if _, err := a.tx.Worker(wid); errors.Is(err, store.ErrNotFound) {
			return Result{Err: fmt.Errorf("worker %s: %w", wid, ErrWorkerNotFound)}
		} else {
			a.must(err)
		}
		t := tasks[i]
		switch {
		case t.Status != store.StatusBlocked:
			return Result{Err: fmt.Errorf("reserve gang %s: task %s is %s: %w", g.ID, t.ID, t.Status, ErrConflict)}
		case !a.f.idx.fits(wid, needOf(t.Resources, t.Tags)):
			return Result{Err: fmt.Errorf("reserve gang %s: task %s does not fit what worker %s has free: %w", g.ID, t.ID, wid, ErrConflict)}
		}
	}
	g.Epoch++
	g.Status, g.Workers, g.ReservedAt = store.GangReserved, slices.Clone(r.Workers), a.now
	g.Failing, g.Final = "", false
	for i, t := range tasks {
		t.Status, t.WorkerID = store.StatusReserved, r.Workers[i]
		a.put(t, store.StatusBlocked)
	}
	a.putGang(g)
	return Result{Jobs: tasks, Gang: g}
}

// claimReserved leases to the claiming worker up to n gang tasks reserved
// for it, oldest first, that the claim serves.
func (a *applier) claimReserved(c *Claim, n int) []*store.Job {
	var out []*store.Job
	for _, it := range a.f.idx.reservedFor(c.WorkerID) {
		if len(out) >= n {
			break
		}
		if a.f.idx.paused[it.kind.queue] || !takes(c.Types, c.Shell, it.kind.typ) {
			continue
		}
		j, err := a.job(it.id)
		if err != nil || j.Status != store.StatusReserved {
			a.f.idx.removeReserved(it.id) // a stray entry
			continue
		}
		a.startAttempt(j, c)
		out = append(out, a.taskClaimed(j))
	}
	return out
}

// taskClaimed moves the gang to running once every task is claimed, and
// returns a copy of the task whose env carries the gang's variables and its
// checkpoint: the claim's reply, not what is stored.
func (a *applier) taskClaimed(j *store.Job) *store.Job {
	g, ok := a.openGang(j)
	if !ok {
		return j
	}
	if g.Status == store.GangReserved && !slices.ContainsFunc(a.tasks(g), func(t *store.Job) bool { return t.Status == store.StatusReserved }) {
		g.Status = store.GangRunning
		a.putGang(g)
	}
	env := maps.Clone(j.Env)
	if env == nil {
		env = make(map[string]string)
	}
	var peers []string
	for i, wid := range g.Workers {
		if i == j.GangIndex {
			continue
		}
		addr := wid
		if w, err := a.tx.Worker(wid); err == nil && w.ExecAddr != "" {
			addr = w.ExecAddr
		}
		peers = append(peers, addr)
	}
	env["GANG_ID"] = g.ID
	env["GANG_SIZE"] = strconv.Itoa(g.Size)
	env["GANG_INDEX"] = strconv.Itoa(j.GangIndex)
	env["GANG_PEERS"] = strings.Join(peers, ",")
	if data, _, err := a.tx.Checkpoint(j.ID); err == nil {
		env["CHECKPOINT_DATA"] = base64.StdEncoding.EncodeToString(data)
	}
	out := *j
	out.Env = env
	return &out
}

// unreserveGang rolls back a reservation that was not all claimed in time:
// the gang drains and waits to be placed again.
func (a *applier) unreserveGang(r *GangRef) Result {
	g, err := a.gangAt(r, store.GangReserved, "roll back")
	if err != nil {
		return Result{Err: err}
	}
	a.drain(g, "", "reservation of epoch "+strconv.FormatUint(r.Epoch, 10)+" was not claimed in time", false, a.now)
	return Result{Gang: g, Jobs: a.tasks(g)}
}
