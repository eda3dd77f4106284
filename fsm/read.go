package fsm

import (
	"errors"
	"fmt"

	"github.com/workron/workron/store"
)

// view runs fn in a read transaction of the current store.
func (f *FSM) view(fn func(tx *store.Tx) error) error {
	f.stMu.RLock()
	defer f.stMu.RUnlock()
	return f.st.View(fn)
}

// Job returns the job with the id, or an error matching ErrNotFound.
func (f *FSM) Job(id string) (*store.Job, error) {
	var j *store.Job
	err := f.view(func(tx *store.Tx) error {
		var err error
		j, err = tx.Job(id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	return j, err
}

// Jobs returns the jobs with the given ids, skipping unknown ones.
func (f *FSM) Jobs(ids []string) ([]*store.Job, error) {
	out := make([]*store.Job, 0, len(ids))
	err := f.view(func(tx *store.Tx) error {
		for _, id := range ids {
			j, err := tx.Job(id)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			out = append(out, j)
		}
		return nil
	})
	return out, err
}

// EachJob calls fn with each job ids names, in order, with its index in
// ids, until fn returns false; unknown ids are left out. It decodes one
// job at a time, so a caller that stops early (a reply's byte bound) reads
// no more. fn runs inside a read transaction: it must not call f.
func (f *FSM) EachJob(ids []string, fn func(i int, j *store.Job) bool) error {
	return f.view(func(tx *store.Tx) error {
		for i, id := range ids {
			j, err := tx.Job(id)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if !fn(i, j) {
				return nil
			}
		}
		return nil
	})
}

// Dependents lists the ids of the jobs that depend on (or run after) the
// job, in the order they were added; an error matching ErrNotFound if the
// job does not exist.
func (f *FSM) Dependents(id string) ([]string, error) {
	var out []string
	err := f.view(func(tx *store.Tx) error {
		h, err := tx.JobHead(id)
		if err != nil {
			return err
		}
		out = tx.Dependents(h.Seq)
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	return out, err
}

// DependentCounts maps each of the ids that names a job to how many jobs
// depend on (or run after) it; unknown ids are left out. It reads only the
// jobs' heads and one key each: what the API checks a submit's
// dependencies against.
func (f *FSM) DependentCounts(ids []string) (map[string]int, error) {
	out := make(map[string]int, len(ids))
	err := f.view(func(tx *store.Tx) error {
		for _, id := range ids {
			h, err := tx.JobHead(id)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			out[id] = tx.DependentCount(h.Seq)
		}
		return nil
	})
	return out, err
}

// ListJobs returns a page of jobs, newest first; see store.ListQuery.
func (f *FSM) ListJobs(q store.ListQuery) ([]*store.Job, uint64, error) {
	var (
		jobs []*store.Job
		next uint64
	)
	err := f.view(func(tx *store.Tx) error {
		var err error
		jobs, next, err = tx.ListJobs(q)
		return err
	})
	return jobs, next, err
}

// CountJobs counts the jobs q selects, examining at most budget index
// entries and records (0: no cap); see store.Tx.CountJobs.
func (f *FSM) CountJobs(q store.ListQuery, budget int) (n int, exact bool, next uint64, err error) {
	err = f.view(func(tx *store.Tx) error {
		n, exact, next, err = tx.CountJobs(q, budget)
		return err
	})
	return n, exact, next, err
}

// Worker returns a registered worker, or an error matching ErrWorkerNotFound.
func (f *FSM) Worker(id string) (*store.Worker, error) {
	var w *store.Worker
	err := f.view(func(tx *store.Tx) error {
		var err error
		w, err = tx.Worker(id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("worker %s: %w", id, ErrWorkerNotFound)
	}
	if err == nil {
		f.workersRead.Add(1)
	}
	return w, err
}

// Workers lists the registered workers in id order.
func (f *FSM) Workers() ([]*store.Worker, error) {
	var out []*store.Worker
	err := f.view(func(tx *store.Tx) error {
		return tx.ForEachWorker(func(w *store.Worker) error {
			out = append(out, w)
			return nil
		})
	})
	f.workersRead.Add(uint64(len(out)))
	return out, err
}

// WorkerPage lists up to limit registered workers whose ids sort after
// after ("": from the first), in id order, and whether more follow.
func (f *FSM) WorkerPage(after string, limit int) ([]*store.Worker, bool, error) {
	var (
		out  []*store.Worker
		more bool
	)
	err := f.view(func(tx *store.Tx) error {
		var err error
		out, more, err = tx.WorkersAfter(after, limit)
		return err
	})
	f.workersRead.Add(uint64(len(out)))
	return out, more, err
}

// WorkerRecordsRead counts the worker records that Worker, Workers and
// WorkerPage have decoded from the store since the FSM was made: what a
// read that should look at few workers is measured by.
func (f *FSM) WorkerRecordsRead() uint64 { return f.workersRead.Load() }

// RunningOf counts the leases each of ids holds.
func (f *FSM) RunningOf(ids []string) []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = len(f.idx.byWorker[id])
	}
	return out
}

// Nodes lists the cluster members' recorded addresses.
func (f *FSM) Nodes() ([]*store.Node, error) {
	var out []*store.Node
	err := f.view(func(tx *store.Tx) error {
		var err error
		out, err = tx.Nodes()
		return err
	})
	return out, err
}

// Applied is the Raft index of the last applied entry whose batch has
// committed; it never waits for an apply in progress.
func (f *FSM) Applied() uint64 {
	return f.published.applied.Load()
}

// LastNow is the time (Unix ns) of the last applied entry: the state's
// "now". Like Applied, it never waits for an apply in progress.
func (f *FSM) LastNow() int64 {
	return f.published.lastNow.Load()
}

// Changed returns a channel closed the next time a job may have become
// claimable (submitted, retried, unblocked, queue resumed, state restored).
func (f *FSM) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

// Claimable reports whether a claim with these filters, applied at now
// (Unix ns), would lease at least one job. It is a hint for long-polls: the
// claim itself decides.
func (f *FSM) Claimable(queues, types []string, shell bool, now int64) bool {
	kinds := claimKinds(queues, types, shell)
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.idx.best(kinds, nil); ok {
		return true
	}
	return f.idx.dueDelayed(kinds, now) || f.idx.flow.dueReopen(kinds, now)
}

// NextDue is the earliest run time (Unix ns) of a job not yet due, or of
// a rate limit's next token when a bucket is empty; 0 if none.
func (f *FSM) NextDue() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	due, reopen := f.idx.nextDue(), f.idx.flow.nextReopen()
	if due == 0 || (reopen != 0 && reopen < due) {
		return reopen
	}
	return due
}

// Lease names one running attempt.
type Lease struct {
	JobID    string
	Lease    uint64
	WorkerID string
	Deadline int64
}

// Expired lists up to limit leases whose deadline is at or before now.
func (f *FSM) Expired(now int64, limit int) []Lease {
	f.mu.Lock()
	defer f.mu.Unlock()
	items := f.idx.expired(now, limit)
	out := make([]Lease, len(items))
	for i, it := range items {
		out[i] = Lease{JobID: it.id, Lease: it.lease, WorkerID: it.worker, Deadline: it.deadline}
	}
	return out
}

// QueueStats is one queue's job counts by status.
type QueueStats struct {
	Name   string
	Paused bool
	Counts map[store.Status]int
}

// Queues lists every queue that holds jobs or is paused, by name.
func (f *FSM) Queues() []QueueStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := f.queueNamesLocked()
	out := make([]QueueStats, len(names))
	for i, q := range names {
		out[i] = f.queueStatsLocked(q)
	}
	return out
}

// QueueNames lists, in order, the names of the queues Queues lists.
func (f *FSM) QueueNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queueNamesLocked()
}

// QueueOf is one queue as Queues lists it, and whether Queues lists it
// (it holds jobs or is paused).
func (f *FSM) QueueOf(name string) (QueueStats, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, counted := f.idx.counts[name]
	_, paused := f.idx.paused[name]
	return f.queueStatsLocked(name), counted || paused
}

func (f *FSM) queueNamesLocked() []string {
	names := make(map[string]bool, len(f.idx.counts)+len(f.idx.paused))
	for q := range f.idx.counts {
		names[q] = true
	}
	for q := range f.idx.paused {
		names[q] = true
	}
	return sortedKeys(names)
}

func (f *FSM) queueStatsLocked(q string) QueueStats {
	c := make(map[store.Status]int)
	for st, n := range f.idx.counts[q] {
		if n != 0 {
			c[st] = n
		}
	}
	return QueueStats{Name: q, Paused: f.idx.paused[q], Counts: c}
}

// Digest hashes the whole state; equal on nodes at the same applied index.
func (f *FSM) Digest() (string, error) {
	f.stMu.RLock()
	defer f.stMu.RUnlock()
	return f.st.Digest()
}

// DigestAt is Digest with the applied index of the same state, read in one
// store transaction (see store.Store.DigestAt).
func (f *FSM) DigestAt() (applied uint64, digest string, err error) {
	f.stMu.RLock()
	defer f.stMu.RUnlock()
	return f.st.DigestAt()
}

// Check verifies the store's indexes; see store.Check.
func (f *FSM) Check() error {
	f.stMu.RLock()
	defer f.stMu.RUnlock()
	return f.st.Check()
}

// ExpiredJobs lists up to limit ids of finished jobs whose retention ran
// out at now, for the leader's retention sweep.
func (f *FSM) ExpiredJobs(now int64, limit int) []string {
	var out []string
	_ = f.view(func(tx *store.Tx) error {
		out = tx.Expired(now, limit)
		return nil
	})
	return out
}

// RunningByWorker counts the leases each worker holds.
func (f *FSM) RunningByWorker() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.idx.byWorker))
	for w, jobs := range f.idx.byWorker {
		out[w] = len(jobs)
	}
	return out
}

// CountByStatus counts the jobs q selects by stored status from the search
// index (store.Tx.CountByStatus), and how many of the pending ones are
// scheduled: their run time is after now. Those are the delayed jobs of
// the in-memory index (index.go), taken under mu with the read transaction
// begun there, so that both are of one applied state; mu is let go before
// the count reads. A job whose run time passed between the last apply and
// now is counted as scheduled only if the apply that made it due has not
// promoted it.
// store.ErrNotIndexed if q has a condition the index does not answer.
func (f *FSM) CountByStatus(q store.ListQuery, now int64) (store.StatusCounts, error) {
	f.stMu.RLock()
	defer f.stMu.RUnlock()
	f.mu.Lock()
	locked := true
	defer func() {
		if locked {
			f.mu.Unlock()
		}
	}()
	var out store.StatusCounts
	err := f.st.View(func(tx *store.Tx) error {
		seqs := f.idx.scheduledAfter(now)
		f.mu.Unlock()
		locked = false
		var err error
		out, err = tx.CountByStatus(q, seqs)
		return err
	})
	return out, err
}
