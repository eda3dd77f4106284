package fsm

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/workron/workron/store"
)

// Overlap policies: what a tick does while the schedule's previous run is
// unfinished.
const (
	OverlapAllow = "allow" // run anyway
	OverlapSkip  = "skip"  // do not run this tick
	OverlapQueue = "queue" // create the run blocked until the previous one ends
)

// Catch-up policies: which ticks a new leader runs that came due while no
// leader could (the leader applies them; the FSM only stores the choice).
const (
	CatchupNone = "none" // none of them
	CatchupOne  = "one"  // the latest of them
	CatchupAll  = "all"  // all of them, up to the leader's cap
)

// ScheduleJobPrefix starts the id of every job a schedule creates.
const ScheduleJobPrefix = "sched-"

// FireJobID is the id of the job a schedule's tick (Unix ns) creates:
// "sched-<name>-<tick in Unix seconds>", or for a manual trigger
// "sched-<name>-manual-<tick in Unix ns>".
func FireJobID(name string, tick int64, manual bool) string {
	if manual {
		return ScheduleJobPrefix + name + "-manual-" + strconv.FormatInt(tick, 10)
	}
	return ScheduleJobPrefix + name + "-" + strconv.FormatInt(tick/1e9, 10)
}

// PutSchedule creates (Create) or replaces a schedule. Replacing keeps its
// progress; a changed cron or time zone, or a resume, starts its ticks
// afresh from the entry's time, so no tick of the old definition or of the
// paused time is caught up.
type PutSchedule struct {
	Name     string `json:"name"`
	Cron     string `json:"cron"`
	Timezone string `json:"tz,omitempty"`
	Job      NewJob `json:"job"`
	Overlap  string `json:"overlap"`
	Catchup  string `json:"catchup"`
	Paused   bool   `json:"paused,omitempty"`
	Create   bool   `json:"create,omitempty"`
	// MaxSchedules (ProtocolScheduleCap), on a create, refuses it when the
	// cluster holds that many schedules (schedule_cap.go); 0: no cap.
	MaxSchedules int `json:"max,omitempty"`
}

// DeleteSchedule removes a schedule; the jobs it created stay.
type DeleteSchedule struct {
	Name string `json:"name"`
}

// PauseSchedule pauses or resumes a schedule. Ticks that fall due while it
// is paused never run.
type PauseSchedule struct {
	Name   string `json:"name"`
	Paused bool   `json:"paused"`
}

// Fire runs a schedule's tick (Unix ns). JobID must be FireJobID(Name,
// Tick, Manual). A regular fire of a tick at or before LastTick, or of a
// paused schedule, changes nothing. Manual (a trigger) runs now whatever
// LastTick is and leaves LastTick alone. Skip accounts for every tick up to
// Tick without running any: Missed of them were missed beyond the
// schedule's catch-up. TraceParent (ProtocolTrace, op name fire_traced),
// when set, is the trace the tick's job stores: the leader's span of the
// fire, or a trigger's request.
type Fire struct {
	Name        string `json:"name"`
	Tick        int64  `json:"tick"`
	JobID       string `json:"job,omitempty"`
	Manual      bool   `json:"manual,omitempty"`
	Skip        bool   `json:"skip,omitempty"`
	Missed      int    `json:"missed,omitempty"`
	TraceParent string `json:"trace,omitempty"`
}

// ScheduleJob decodes a stored schedule's job template.
func ScheduleJob(sc *store.Schedule) (NewJob, error) {
	var nj NewJob
	if err := json.Unmarshal(sc.Job, &nj); err != nil {
		return nj, fmt.Errorf("schedule %s: job template: %w", sc.Name, err)
	}
	return nj, nil
}

// schedule loads a schedule, or returns ErrScheduleNotFound.
func (a *applier) schedule(name string) (*store.Schedule, error) {
	sc, err := a.tx.Schedule(name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("schedule %s: %w", name, ErrScheduleNotFound)
	}
	a.must(err)
	return sc, nil
}

func (a *applier) putSchedule(p *PutSchedule) Result {
	if err := checkSchedule(p); err != nil {
		return Result{Err: err}
	}
	tmpl, err := json.Marshal(p.Job)
	a.must(err)
	sc, err := a.tx.Schedule(p.Name)
	switch {
	case errors.Is(err, store.ErrNotFound) && p.Create:
		if err := a.scheduleRoom(p); err != nil {
			return Result{Err: err}
		}
		sc = &store.Schedule{Name: p.Name, CreatedAt: a.now, LastTick: a.now}
	case errors.Is(err, store.ErrNotFound):
		return Result{Err: fmt.Errorf("schedule %s: %w", p.Name, ErrScheduleNotFound)}
	case err != nil:
		a.must(err)
	case p.Create:
		return Result{Err: fmt.Errorf("schedule %s already exists: %w", p.Name, ErrConflict)}
	case sc.Cron != p.Cron || sc.Timezone != p.Timezone || (sc.Paused && !p.Paused):
		sc.LastTick = max(sc.LastTick, a.now)
	}
	sc.Cron, sc.Timezone, sc.Job = p.Cron, p.Timezone, tmpl
	sc.Overlap, sc.Catchup, sc.Paused = p.Overlap, p.Catchup, p.Paused
	sc.UpdatedAt = a.now
	a.must(a.tx.PutSchedule(sc, a.index))
	return Result{Schedule: sc}
}

// checkSchedule refuses what the API would have refused: the FSM cannot
// parse cron (see above), but it keeps its own rules.
func checkSchedule(p *PutSchedule) error {
	j := &p.Job
	switch {
	case p.Name == "":
		return &ValidationError{Field: "name", Reason: "must not be empty"}
	case p.Cron == "":
		return &ValidationError{Field: "cron", Reason: "must not be empty"}
	case p.Overlap != OverlapAllow && p.Overlap != OverlapSkip && p.Overlap != OverlapQueue:
		return &ValidationError{Field: "overlap", Reason: strconv.Quote(p.Overlap) + " is not allow, skip or queue"}
	case p.Catchup != CatchupNone && p.Catchup != CatchupOne && p.Catchup != CatchupAll:
		return &ValidationError{Field: "catchup", Reason: strconv.Quote(p.Catchup) + " is not none, one or all"}
	case j.Command == "" && j.Type == "":
		return &ValidationError{Field: "job.command", Reason: "a job needs a command or a type"}
	case j.ID != "":
		return &ValidationError{Field: "job.id", Reason: "a schedule names its jobs after its ticks"}
	case j.IdempotencyKey != "":
		return &ValidationError{Field: "job.idempotency_key", Reason: "a schedule's jobs are already unique per tick"}
	case len(j.DependsOn) > 0:
		return &ValidationError{Field: "job.depends_on", Reason: "a schedule's jobs cannot depend on other jobs"}
	case j.RunAt != 0:
		return &ValidationError{Field: "job.run_at", Reason: "a schedule's jobs run at their tick"}
	}
	return nil
}

func (a *applier) deleteSchedule(d *DeleteSchedule) Result {
	sc, err := a.schedule(d.Name)
	if err != nil {
		return Result{Err: err}
	}
	a.must(a.tx.DeleteSchedule(d.Name))
	return Result{Schedule: sc}
}

func (a *applier) pauseSchedule(p *PauseSchedule) Result {
	sc, err := a.schedule(p.Name)
	if err != nil {
		return Result{Err: err}
	}
	if sc.Paused && !p.Paused {
		sc.LastTick = max(sc.LastTick, a.now)
	}
	sc.Paused = p.Paused
	sc.UpdatedAt = a.now
	a.must(a.tx.PutSchedule(sc, a.index))
	return Result{Schedule: sc}
}

// fire runs one tick of a schedule; see Fire.
func (a *applier) fire(f *Fire) Result {
	sc, err := a.schedule(f.Name)
	if err != nil {
		return Result{Err: err}
	}
	if !f.Manual && (f.Tick <= sc.LastTick || sc.Paused) {
		return Result{Schedule: sc} // a duplicate or late proposal: nothing to do
	}
	if f.Skip {
		if f.Manual {
			return Result{Err: &ValidationError{Field: "skip", Reason: "a manual run cannot be skipped"}}
		}
		sc.LastTick = f.Tick
		sc.Missed += uint64(max(f.Missed, 0))
		a.must(a.tx.PutSchedule(sc, a.index))
		return Result{Schedule: sc}
	}
	id := FireJobID(f.Name, f.Tick, f.Manual)
	if f.JobID != id {
		return Result{Err: &ValidationError{Field: "job", Reason: fmt.Sprintf("tick %d of schedule %s makes job %s, not %s", f.Tick, f.Name, id, f.JobID)}}
	}
	prev := a.unfinishedRun(sc)
	if prev != nil && sc.Overlap == OverlapSkip {
		if f.Manual {
			return Result{Err: fmt.Errorf("schedule %s skips overlapping runs and run %s is still %s: %w", sc.Name, prev.ID, prev.Status, ErrConflict)}
		}
		sc.LastTick = f.Tick
		sc.Skipped++
		a.must(a.tx.PutSchedule(sc, a.index))
		return Result{Schedule: sc}
	}
	if existing, err := a.tx.Job(id); err == nil {
		// This tick already has its job (a schedule of the same name made
		// it before being deleted and created again): it is accounted for.
		if f.Manual {
			return Result{Err: fmt.Errorf("job %s already exists: %w", id, ErrConflict)}
		}
		sc.LastTick = f.Tick
		a.must(a.tx.PutSchedule(sc, a.index))
		return Result{Schedule: sc, Jobs: []*store.Job{existing}}
	}
	nj, err := ScheduleJob(sc)
	a.must(err)
	nj.ID, nj.Schedule, nj.ScheduledFor = id, sc.Name, f.Tick
	if f.TraceParent != "" {
		nj.TraceParent = f.TraceParent
	}
	r := a.submit(&Submit{Jobs: []NewJob{nj}})
	if r.Err != nil {
		if f.Manual {
			return Result{Err: r.Err}
		}
		// The tick is spent either way: retrying it would fail the same.
		sc.LastTick, sc.LastError = f.Tick, r.Err.Error()
		a.must(a.tx.PutSchedule(sc, a.index))
		return Result{Schedule: sc}
	}
	j := r.Jobs[0]
	if prev != nil && sc.Overlap == OverlapQueue {
		a.queueAfter(j, prev)
	}
	if !f.Manual {
		sc.LastTick = f.Tick
	}
	sc.LastRun, sc.LastJobID, sc.LastError = f.Tick, j.ID, ""
	sc.Runs++
	a.must(a.tx.PutSchedule(sc, a.index))
	return Result{Schedule: sc, Jobs: []*store.Job{j}}
}

// unfinishedRun is the schedule's latest job if it has not finished (a job
// deleted by retention has).
func (a *applier) unfinishedRun(sc *store.Schedule) *store.Job {
	if sc.LastJobID == "" {
		return nil
	}
	j, err := a.tx.Job(sc.LastJobID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	a.must(err)
	if j.Status.Finished() {
		return nil
	}
	return j
}

// queueAfter blocks a just-created pending run until prev finishes, however
// prev ends (see releaseQueued): unlike a dependency, a failed or cancelled
// previous run does not fail the next one.
func (a *applier) queueAfter(j, prev *store.Job) {
	a.unindex(j)
	j.Status = store.StatusBlocked
	j.Waiting = 1
	j.After = prev.ID
	a.put(j, store.StatusPending)
	a.must(a.tx.AddDependent(prev.Seq, j))
}

// releaseQueued unblocks the run queued after j once j has just finished.
// put calls it for every stored change.
func (a *applier) releaseQueued(j *store.Job, prev store.Status) {
	if j.Schedule == "" || !j.Status.Finished() || prev.Finished() {
		return
	}
	a.unblockDependents(j, true)
}

// Schedule returns the named schedule, or an error matching
// ErrScheduleNotFound.
func (f *FSM) Schedule(name string) (*store.Schedule, error) {
	var sc *store.Schedule
	err := f.view(func(tx *store.Tx) error {
		var err error
		sc, err = tx.Schedule(name)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("schedule %s: %w", name, ErrScheduleNotFound)
	}
	return sc, err
}

// SchedulePage lists up to limit schedules whose names sort after after
// ("": from the first), in name order, and whether more follow.
func (f *FSM) SchedulePage(after string, limit int) ([]*store.Schedule, bool, error) {
	var (
		out  []*store.Schedule
		more bool
	)
	err := f.view(func(tx *store.Tx) error {
		var err error
		out, more, err = tx.SchedulesAfter(after, limit)
		return err
	})
	return out, more, err
}

// Schedules lists every schedule in name order.
func (f *FSM) Schedules() ([]*store.Schedule, error) {
	var out []*store.Schedule
	err := f.view(func(tx *store.Tx) error {
		return tx.ForEachSchedule(func(sc *store.Schedule) error {
			out = append(out, sc)
			return nil
		})
	})
	return out, err
}
