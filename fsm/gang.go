package fsm

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

// SubmitGang creates a gang of Size tasks from one job template, all blocked
// until the leader places the gang. An IdempotencyKey names the gang: a
// submit whose key is held by a task of a gang returns that gang.
type SubmitGang struct {
	Size int    `json:"size"`
	Job  NewJob `json:"job"`
}

// ReserveGang places a blocked gang: task i is reserved for Workers[i]. It
// applies only if the gang is still blocked at Epoch (the epoch the leader
// saw), is due, and every worker is registered and has room for its task
// beside what its running and reserved jobs hold, and the tags. All N tasks
// are reserved, or none. Whether a worker is alive is the leader's
// judgement (idle workers poll without writing to the log); a reservation
// on a worker that does not claim rolls back after a timeout.
type ReserveGang struct {
	GangID  string   `json:"gang"`
	Epoch   uint64   `json:"epoch"`
	Workers []string `json:"workers"`
}

// GangRef names one reservation or drain of a gang: UnreserveGang rolls a
// reservation back (its tasks were not all claimed in time), ForceDrain ends
// a drain whose tasks did not all acknowledge in time. Either changes nothing
// once the gang has moved past Epoch.
type GangRef struct {
	GangID string `json:"gang"`
	Epoch  uint64 `json:"epoch"`
}

// WorkerOffline declares a silent worker offline: its leases end as expired
// and its reservations roll back. It applies only if the worker was not heard
// from after SeenAt (its last heartbeat as the leader saw it). Draw is the
// leader's jitter draw for the retries it causes.
type WorkerOffline struct {
	WorkerID string  `json:"worker"`
	SeenAt   int64   `json:"seen"`
	Draw     float64 `json:"draw,omitempty"`
}

// Preempted acknowledges that a gang task stopped for the drain of Epoch.
type Preempted struct {
	JobID string `json:"job"`
	Epoch uint64 `json:"epoch"`
	Token string `json:"token,omitempty"` // the caller's token name (ProtocolFence)
}

// Checkpoint keeps Data as a gang task's checkpoint, replacing any older
// one, while its drain of Epoch waits for it. The task's next attempt gets it.
type Checkpoint struct {
	JobID string `json:"job"`
	Epoch uint64 `json:"epoch"`
	Data  []byte `json:"data"`
	Token string `json:"token,omitempty"` // the caller's token name (ProtocolFence)
}

// gang loads a gang, or returns ErrGangNotFound.
func (a *applier) gang(id string) (*store.Gang, error) {
	g, err := a.tx.Gang(id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("gang %s: %w", id, ErrGangNotFound)
	}
	a.must(err)
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
		j := a.newJob(&nj, JobIDPrefix+strconv.FormatUint(seq, 10), seq)
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

// taskDone follows a successful report: a plain job's dependents are
// unblocked at once; a gang's when its last task is done.
func (a *applier) taskDone(j *store.Job) {
	g, ok := a.openGang(j)
	if !ok {
		a.unblockDependents(j, false)
		return
	}
	tasks := a.tasks(g)
	if slices.ContainsFunc(tasks, func(t *store.Job) bool { return t.Status != store.StatusDone }) {
		return
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
}

func (a *applier) unreserveGang(r *GangRef) Result {
	g, err := a.gang(r.GangID)
	if err != nil {
		return Result{Err: err}
	}
	if g.Status != store.GangReserved || g.Epoch != r.Epoch {
		return Result{Err: fmt.Errorf("roll back gang %s epoch %d: it is %s at epoch %d: %w", g.ID, r.Epoch, g.Status, g.Epoch, ErrStaleEpoch)}
	}
	a.drain(g, "", "reservation of epoch "+strconv.FormatUint(r.Epoch, 10)+" was not claimed in time", false, a.now)
	return Result{Gang: g, Jobs: a.tasks(g)}
}

func (a *applier) forceDrain(r *GangRef) Result {
	g, err := a.gang(r.GangID)
	if err != nil {
		return Result{Err: err}
	}
	if g.Status != store.GangDraining || g.Epoch != r.Epoch {
		return Result{Err: fmt.Errorf("force drain of gang %s epoch %d: it is %s at epoch %d: %w", g.ID, r.Epoch, g.Status, g.Epoch, ErrStaleEpoch)}
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

func (a *applier) checkpoint(c *Checkpoint) Result {
	if len(c.Data) > MaxCheckpointBytes {
		return Result{Err: &ValidationError{Field: "checkpoint", Reason: fmt.Sprintf("larger than %d bytes", MaxCheckpointBytes)}}
	}
	j, g, err := a.drainingTask(c.JobID, c.Epoch, c.Token, "checkpoint")
	if err != nil {
		return Result{Err: err}
	}
	a.must(a.tx.PutCheckpoint(j.ID, c.Epoch, c.Data))
	return Result{Jobs: []*store.Job{j}, Gang: g}
}

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
		a.must(a.tx.PutWorker(w, a.index))
		a.f.idx.gx.setWorker(w)
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

// Checkpoint returns a job's latest checkpoint and the epoch it was taken
// in, or an error matching ErrNotFound when it has none.
func (f *FSM) Checkpoint(jobID string) ([]byte, uint64, error) {
	var (
		data  []byte
		epoch uint64
	)
	err := f.view(func(tx *store.Tx) error {
		var err error
		data, epoch, err = tx.Checkpoint(jobID)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, fmt.Errorf("checkpoint of job %s: %w", jobID, ErrNotFound)
	}
	return data, epoch, err
}
