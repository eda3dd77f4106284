package fsm

// Workers: registering, who may act as a worker id (its token), the
// heartbeat a claim records, and a worker declared offline. A worker's
// heartbeat that renews its leases is in lease.go.

import (
	"errors"
	"fmt"
	"time"

	"github.com/workron/workron/store"
)

// register records a worker, keeping its first registration time. The id
// is the registering token's (name) from then on, unless another token
// holds it and its worker is active (ErrForbidden).
func (a *applier) register(r *Register) Result {
	w := r.Worker
	if w.ID == "" {
		return Result{Err: &ValidationError{Field: "id", Reason: "must not be empty"}}
	}
	if err := a.mayActAs(w.ID, r.Token); err != nil {
		return Result{Err: err}
	}
	if err := a.admitWorker(w.ID, r.Token, r.MaxWorkers); err != nil {
		return Result{Err: fmt.Errorf("register worker %s: %w", w.ID, err)}
	}
	w.Owner = r.Token
	if old, err := a.tx.Worker(w.ID); err == nil {
		w.RegisteredAt = old.RegisteredAt
		if r.Token == "" {
			w.Owner = old.Owner
		}
	} else {
		w.RegisteredAt = a.now
	}
	w.LastHeartbeat = a.now
	a.putWorker(&w)
	a.readyChanged = true // its capacity or tags may fit waiting jobs now
	return Result{Worker: &w}
}

// mayActAs checks that the token (name) may claim, register or heartbeat
// as the worker id: a worker id is the token's that registered it while
// the worker is active (not declared offline). Either name empty (auth
// off, or from before ProtocolFence) skips the check.
func (a *applier) mayActAs(workerID, token string) error {
	if token == "" {
		return nil
	}
	w, err := a.tx.Worker(workerID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	a.must(err)
	if w.Owner != "" && w.Owner != token && !w.Offline() {
		return fmt.Errorf("worker %s belongs to another token while it is active: %w", workerID, ErrForbidden)
	}
	return nil
}

// touchEvery is how stale a worker's stored LastHeartbeat may get before a
// claim rewrites it.
const touchEvery = int64(time.Second)

// touchWorker records that a worker was heard from, registering it (for
// the token) if it never did (v0 workers may claim without
// registering).
func (a *applier) touchWorker(id string, queues []string, token string) *store.Worker {
	w, err := a.tx.Worker(id)
	if errors.Is(err, store.ErrNotFound) {
		w = &store.Worker{ID: id, RegisteredAt: a.now, Queues: queues, Owner: token}
	} else {
		a.must(err)
		if a.now-w.LastHeartbeat < touchEvery && w.OfflineAt == 0 && (token == "" || w.Owner == token) {
			return w // heard from just now: spare the write on a hot path
		}
		if token != "" {
			w.Owner = token // mayActAs let it: the id was nobody's, or its worker offline
		}
	}
	w.LastHeartbeat = a.now
	a.putWorker(w)
	return w
}

// workerOffline declares a silent worker offline (see WorkerOffline): its
// leases end as expired, and a gang it held a reservation for drains.
func (a *applier) workerOffline(o *WorkerOffline) Result {
	w, err := a.tx.Worker(o.WorkerID)
	if errors.Is(err, store.ErrNotFound) {
		return Result{Err: fmt.Errorf("worker %s: %w", o.WorkerID, ErrWorkerNotFound)}
	}
	a.must(err)
	if w.LastHeartbeat > o.SeenAt {
		return Result{Err: fmt.Errorf("worker %s was heard from after %d: %w", w.ID, o.SeenAt, ErrConflict)}
	}
	if !w.Offline() {
		w.OfflineAt = a.now
		a.putWorker(w)
	}
	r := Result{Worker: w}
	msg := "worker " + w.ID + " went offline"
	for _, id := range a.f.idx.workerJobs(w.ID) {
		j, err := a.job(id)
		if err != nil {
			continue
		}
		prev := j.Status
		a.unindex(j)
		j.ExitCode = nil
		a.failAttempt(j, prev, attemptEnd{msg: msg, draw: o.Draw, expired: true})
		r.Jobs = append(r.Jobs, j)
	}
	for _, it := range a.f.idx.reservedFor(w.ID) {
		j, err := a.job(it.id)
		if err != nil || j.Status != store.StatusReserved {
			continue
		}
		if g, ok := a.openGang(j); ok && g.Status == store.GangReserved {
			a.drain(g, "", msg+" before claiming task "+j.ID, false, a.now)
		}
	}
	return r
}

// forgetWorker removes a worker's record (see ForgetWorker): only one that
// was not heard from after SeenAt and holds no lease or reservation.
func (a *applier) forgetWorker(f *ForgetWorker) Result {
	w, err := a.tx.Worker(f.WorkerID)
	if errors.Is(err, store.ErrNotFound) {
		return Result{Err: fmt.Errorf("worker %s: %w", f.WorkerID, ErrWorkerNotFound)}
	}
	a.must(err)
	switch {
	case w.LastHeartbeat > f.SeenAt:
		return Result{Err: fmt.Errorf("worker %s was heard from after %d: %w", w.ID, f.SeenAt, ErrConflict)}
	case len(a.f.idx.workerJobs(w.ID)) > 0 || len(a.f.idx.reservedFor(w.ID)) > 0:
		return Result{Err: fmt.Errorf("worker %s holds leases or gang reservations: %w", w.ID, ErrConflict)}
	}
	a.must(a.tx.DeleteWorker(w.ID))
	a.f.idx.gx.forgetWorker(w.ID)
	a.f.idx.wx.remove(w.ID)
	return Result{Worker: w}
}
