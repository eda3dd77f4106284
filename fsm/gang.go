package fsm

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/workron/workron/store"
)

// Gangs. A gang is N tasks (jobs) that run at the same time on N distinct
// workers, or not at all. Its tasks are created blocked; the leader picks N
// workers that fit and proposes ReserveGang, which re-checks every worker's
// free capacity here and reserves all N tasks or none. A reserved task is
// claimed only by its worker. When a task fails, or its worker is lost,
// while others run, the gang drains: each running sibling is told to stop
// (a "preempt" action carrying the drain's epoch), may leave a checkpoint,
// and acknowledges; the gang then waits to be placed again, or fails as a
// unit when the failed task has no attempts left. Only the failed task's
// attempt counts: its siblings' attempts are given back.
//
// The gang's rules, by file: its commands are in command.go; creating,
// cancelling, retrying, finishing and forgetting a gang here; placing it
// (reservation, the claims of reserved tasks, roll-back) in gang_reserve.go;
// draining and preemption in gang_drain.go; checkpoints in
// gang_checkpoint.go; what each worker has free in resources.go.

// Gang limits.
const (
	// MaxGangSize is the most tasks one gang may have.
	MaxGangSize = 64
	// MaxCheckpointBytes is the largest checkpoint kept per task. Checkpoints
	// are replicated state, so they are small by design; keep large state
	// elsewhere and checkpoint a reference to it.
	MaxCheckpointBytes = 1 << 20
	// GangIDPrefix starts every gang id: "gang-" and its first task's seq.
	GangIDPrefix = "gang-"
	// maxStoreKey is the longest key bbolt stores.
	maxStoreKey = 32768
)

// gang loads a gang, or returns ErrGangNotFound.
func (a *applier) gang(id string) (*store.Gang, error) {
	g, err := a.tx.Gang(id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("gang %s: %w", id, ErrGangNotFound)
	}
	a.must(err)
	return g, nil
}

// gangAt loads the gang r names if it is still st at r.Epoch, or returns
// ErrGangNotFound, or ErrStaleEpoch for a gang that has moved on; what
// starts the error ("roll back").
func (a *applier) gangAt(r *GangRef, st store.GangStatus, what string) (*store.Gang, error) {
	g, err := a.gang(r.GangID)
	if err != nil {
		return nil, err
	}
	if g.Status != st || g.Epoch != r.Epoch {
		return nil, fmt.Errorf("%s gang %s epoch %d: it is %s at epoch %d: %w", what, g.ID, r.Epoch, g.Status, g.Epoch, ErrStaleEpoch)
	}
	return g, nil
}

// putGang stores a gang and keeps the open-gangs index.
func (a *applier) putGang(g *store.Gang) {
	a.must(a.tx.PutGang(g, a.index))
	a.f.idx.gx.setGang(g)
}

// tasks loads a gang's tasks, in index order, fresh from the store.
func (a *applier) tasks(g *store.Gang) []*store.Job {
	out := make([]*store.Job, 0, len(g.Tasks))
	for _, id := range g.Tasks {
		if j, err := a.job(id); err == nil {
			out = append(out, j)
		}
	}
	return out
}

// openGang returns the job's gang if it has one that is not finished.
func (a *applier) openGang(j *store.Job) (*store.Gang, bool) {
	if j.GangID == "" {
		return nil, false
	}
	g, err := a.gang(j.GangID)
	if err != nil || g.Status.Finished() {
		return nil, false
	}
	return g, true
}

// inOpenGang reports whether j is a task of an unfinished gang: its
// retention starts only when the gang finishes.
func (a *applier) inOpenGang(j *store.Job) bool {
	_, ok := a.openGang(j)
	return ok
}

// submitGang creates a gang and its tasks, all blocked until the leader
// places it; a held idempotency key answers with its gang.
func (a *applier) submitGang(s *SubmitGang) Result {
	nj := s.Job
	if err := checkGangJob(s); err != nil {
		return Result{Err: err}
	}
	if nj.IdempotencyKey != "" {
		if r, done := a.existingGang(nj.IdempotencyKey); done {
			return r
		}
	}
	jobs := make([]*store.Job, s.Size)
	g := &store.Gang{Size: s.Size, Status: store.GangBlocked, Type: nj.Type, Priority: nj.Priority,
		Resources: nj.Resources, Tags: nj.Tags, CreatedAt: a.now, RunAt: max(nj.RunAt, a.now)}
	for i := range jobs {
		seq, err := a.tx.NextSeq()
		a.must(err)
		if i == 0 {
			g.ID, g.Seq = GangIDPrefix+strconv.FormatUint(seq, 10), seq
		}
		j := new(store.Job)
		a.newJob(j, &nj, jobID(seq), seq)
		if i > 0 {
			j.IdempotencyKey = "" // the key names the gang through its first task
		}
		j.Status = store.StatusBlocked
		j.GangID, j.GangIndex, j.GangSize = g.ID, i, s.Size
		jobs[i] = j
		g.Tasks = append(g.Tasks, j.ID)
	}
	g.Queue = jobs[0].Queue
	for _, j := range jobs {
		a.insert(j)
	}
	a.keepKey(nj.IdempotencyKey, jobs[0].ID, nj.UniqueFor)
	a.putGang(g)
	return Result{Jobs: jobs, Gang: g}
}

// checkGangJob refuses what a gang cannot be: the API checks the same first.
func checkGangJob(s *SubmitGang) error {
	nj := &s.Job
	r := nj.Resources
	switch {
	case s.Size < 1 || s.Size > MaxGangSize:
		return &ValidationError{Field: "gang_size", Reason: fmt.Sprintf("must be between 1 and %d, got %d", MaxGangSize, s.Size)}
	case nj.ID != "":
		return &ValidationError{Field: "id", Reason: "gang tasks are numbered by the cluster"}
	case len(nj.DependsOn) > 0:
		return &ValidationError{Field: "depends_on", Reason: "a gang cannot depend on other jobs"}
	case nj.Command == "" && nj.Type == "":
		return &ValidationError{Field: "command", Reason: "a gang needs a command or a type"}
	case r.VRAMMB < 0 || r.MemoryMB < 0 || r.CPUMillis < 0 || r.Slots < 0:
		return &ValidationError{Field: "resources", Reason: "must not be negative"}
	case len(nj.IdempotencyKey) > maxStoreKey:
		return &ValidationError{Field: "idempotency_key", Reason: fmt.Sprintf("longer than %d bytes", maxStoreKey)}
	}
	return nil
}

// existingGang answers a gang submit whose idempotency key is held: with the
// gang that holds it, or a conflict when a plain job holds it. done is false
// when the key is free.
func (a *applier) existingGang(key string) (Result, bool) {
	j, err := a.keyHolder(key)
	switch {
	case err != nil:
		return Result{Err: err}, true
	case j == nil:
		return Result{}, false
	case j.GangID == "":
		return Result{Err: fmt.Errorf("idempotency_key %q belongs to job %s, which is not a gang: %w", key, j.ID, ErrConflict)}, true
	}
	g, err := a.gang(j.GangID)
	if err != nil {
		return Result{Err: fmt.Errorf("idempotency_key %q belongs to job %s of a deleted gang: %w", key, j.ID, ErrConflict)}, true
	}
	return Result{Jobs: a.tasks(g), Gang: g, Existing: true}, true
}

// gangTaskDone follows the success of j and reports whether j is a task of
// an unfinished gang: once the gang's last task is done, the gang is done
// and every task's dependents are unblocked. It does nothing for a plain
// job (false).
func (a *applier) gangTaskDone(j *store.Job) bool {
	g, ok := a.openGang(j)
	if !ok {
		return false
	}
	tasks := a.tasks(g)
	if slices.ContainsFunc(tasks, func(t *store.Job) bool { return t.Status != store.StatusDone }) {
		return true
	}
	g.Status, g.DoneAt = store.GangDone, a.now
	a.putGang(g)
	for _, t := range tasks {
		if t.ID == j.ID {
			t = j
		}
		a.put(t, t.Status) // its retention starts now
		a.must(a.tx.DeleteCheckpoint(t.ID))
		a.unblockDependents(t, false)
	}
	return true
}

// cancelGang cancels every task of a task's unfinished gang; ok is false
// for jobs that are not such tasks.
func (a *applier) cancelGang(j *store.Job, c *Cancel) (Result, bool) {
	g, ok := a.openGang(j)
	if !ok {
		return Result{}, false
	}
	g.Status, g.DoneAt, g.Workers = store.GangCancelled, a.now, nil
	a.putGang(g)
	for _, id := range g.Tasks {
		a.cancel(&Cancel{JobID: id, Cascade: c.Cascade}) // a done task stays done
		a.must(a.tx.DeleteCheckpoint(id))
	}
	j, err := a.job(j.ID)
	if err != nil {
		return Result{Err: err}, true
	}
	return Result{Jobs: []*store.Job{j}, Gang: g}, true
}

// retryGang re-queues a failed or cancelled gang, every task with a fresh
// attempt budget; ok is false for jobs that are not gang tasks.
func (a *applier) retryGang(j *store.Job, dependents bool) (Result, bool) {
	if j.GangID == "" {
		return Result{}, false
	}
	g, err := a.gang(j.GangID)
	if err != nil {
		return Result{Err: err}, true
	}
	if g.Status != store.GangFailed && g.Status != store.GangCancelled {
		return Result{Err: &StateError{JobID: j.ID, Status: "in gang " + g.ID + ", which is " + string(g.Status), Op: "retry"}}, true
	}
	tasks := a.tasks(g)
	for _, t := range tasks {
		if !t.Status.Finished() {
			return Result{Err: &StateError{JobID: t.ID, Status: string(t.Status), Op: "retry gang " + g.ID + " while task"}}, true
		}
	}
	g.Status, g.DoneAt, g.RunAt, g.Final, g.Failing = store.GangBlocked, 0, a.now, false, ""
	a.putGang(g)
	for _, t := range tasks {
		prev := t.Status
		t.Attempts, t.DoneAt, t.RunAt, t.Status = 0, 0, a.now, store.StatusBlocked
		a.put(t, prev)
	}
	res := Result{Gang: g}
	for _, t := range tasks {
		if t.ID == j.ID {
			res.Jobs = append(res.Jobs, t)
		}
	}
	if dependents {
		// Every task is blocked again before any dependent is looked at, so
		// a dependent of two tasks sees neither as failed.
		for _, t := range tasks {
			res.Jobs = append(res.Jobs, a.reviveDependents(t)...)
		}
	}
	return res, true
}

// forgetGangTask drops what a deleted job leaves: its checkpoint, and its
// gang's record once no task of it is left.
func (a *applier) forgetGangTask(j *store.Job) {
	a.must(a.tx.DeleteCheckpoint(j.ID))
	if j.GangID == "" {
		return
	}
	g, err := a.tx.Gang(j.GangID)
	if err != nil {
		return
	}
	if !slices.ContainsFunc(g.Tasks, a.tx.HasJob) {
		a.must(a.tx.DeleteGang(g.ID))
		delete(a.f.idx.gx.open, g.ID)
	}
}

// Gang returns a gang and its tasks in index order, or an error matching
// ErrGangNotFound.
func (f *FSM) Gang(id string) (*store.Gang, []*store.Job, error) {
	var (
		g    *store.Gang
		jobs []*store.Job
	)
	err := f.view(func(tx *store.Tx) error {
		var err error
		if g, err = tx.Gang(id); err != nil {
			return err
		}
		for _, tid := range g.Tasks {
			j, err := tx.Job(tid)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			jobs = append(jobs, j)
		}
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, fmt.Errorf("gang %s: %w", id, ErrGangNotFound)
	}
	return g, jobs, err
}
