package fsm

// Telling a worker at once that an attempt of its own must stop.
//
// A cancel of a running job, or its gang's drain, changes the job's record;
// the worker learns what to do from the actions its next heartbeat's reply
// carries (lease.go). A worker may also wait for them (the API's POST
// /workers/{id}/actions long-poll): WatchStops gives it a channel closed
// after the next entry that asks one of its attempts to stop has applied,
// and StopActions reads what its attempts must do. Neither is replicated
// state: the watches live in this node's memory, apply only closes their
// channels once its transaction has committed, and an entry applies the
// same with or without them.

import (
	"sync"

	"github.com/workron/workron/store"
)

// stopActions is what the worker of j's attempt must do with it: cancel it
// (the job is cancelling), stop it for its gang's drain, or nothing.
func stopActions(j *store.Job) []Action {
	var out []Action
	if j.Status == store.StatusCancelling {
		out = append(out, Action{JobID: j.ID, Lease: j.Lease, Action: "cancel"})
	}
	return append(out, preemptActions(j)...)
}

// stopWatch is the watch of one worker's attempts: a channel closed at
// the next stop, shared by the waits of that worker.
type stopWatch struct {
	ch   chan struct{}
	refs int
}

// stopWatches are the watches of this node, by worker id: at most one per
// worker, dropped when its last wait ends or its channel closes.
type stopWatches struct {
	mu sync.Mutex
	by map[string]*stopWatch
}

// watched reports whether a wait watches worker.
func (s *stopWatches) watched(worker string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.by[worker] != nil
}

// wake closes the watches of workers.
func (s *stopWatches) wake(workers []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range workers {
		if sw := s.by[id]; sw != nil {
			close(sw.ch)
			delete(s.by, id)
		}
	}
}

// wakeAll closes every watch (the state was replaced by a snapshot).
func (s *stopWatches) wakeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, sw := range s.by {
		close(sw.ch)
		delete(s.by, id)
	}
}

// WatchStops returns a channel closed after the next applied entry that
// asks an attempt of worker to stop (a cancel of its running job, its
// gang's drain), or replaces the state with a snapshot; and the function
// that ends the wait, which the caller must call once. Call it before
// StopActions, so that a stop applied between the two is not missed. A
// closed channel may find no action (the attempt was renewed while its
// gang drains, or has ended since): read StopActions again.
func (f *FSM) WatchStops(worker string) (<-chan struct{}, func()) {
	s := &f.stops
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = make(map[string]*stopWatch)
	}
	sw := s.by[worker]
	if sw == nil {
		sw = &stopWatch{ch: make(chan struct{})}
		s.by[worker] = sw
	}
	sw.refs++
	var once sync.Once
	return sw.ch, func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if sw.refs--; sw.refs == 0 && s.by[worker] == sw {
				delete(s.by, worker)
			}
		})
	}
}

// StopActions lists what worker must do with the attempts it holds leases
// on (cancel, preempt), in job id order; the attempts of skip are left
// out. It reads at most the worker's leased jobs.
func (f *FSM) StopActions(worker string, skip map[string]uint64) ([]Action, error) {
	f.mu.Lock()
	ids := f.idx.workerJobs(worker)
	f.mu.Unlock()
	var out []Action
	err := f.EachJob(ids, func(_ int, j *store.Job) bool {
		if lease, ok := skip[j.ID]; ok && lease == j.Lease {
			return true
		}
		if j.WorkerID == worker && j.Status.Leased() {
			out = append(out, stopActions(j)...)
		}
		return true
	})
	return out, err
}

// LeasedTo returns the attempts (job id → lease) whose jobs worker holds
// leases on now, in a new map: a long-poll keeps no more of what a request
// named than the worker holds.
func (f *FSM) LeasedTo(worker string, attempts map[string]uint64) map[string]uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	held := f.idx.byWorker[worker]
	out := make(map[string]uint64, min(len(attempts), len(held)))
	for id, lease := range attempts {
		if _, ok := held[id]; ok {
			out[id] = lease
		}
	}
	return out
}

// noteStop records, during an apply, that j's worker must learn of a stop
// once the entry has committed, if a wait watches it.
func (a *applier) noteStop(j *store.Job) {
	if j.WorkerID == "" || !j.Status.Leased() || len(stopActions(j)) == 0 || !a.f.stops.watched(j.WorkerID) {
		return
	}
	a.f.stopped = append(a.f.stopped, j.WorkerID)
}

// wakeStopped closes the watches of the workers noted by the entries just
// applied. Callers hold mu.
func (f *FSM) wakeStopped() {
	if len(f.stopped) == 0 {
		return
	}
	f.stops.wake(f.stopped)
	clear(f.stopped)
	f.stopped = f.stopped[:0]
}
