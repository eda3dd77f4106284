package fsm_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

func putSchedule(p fsm.PutSchedule) fsm.Cmd {
	if p.Cron == "" {
		p.Cron = "@every 1m"
	}
	if p.Job.Command == "" && p.Job.Type == "" {
		p.Job.Command = "echo tick"
	}
	if p.Overlap == "" {
		p.Overlap = fsm.OverlapAllow
	}
	if p.Catchup == "" {
		p.Catchup = fsm.CatchupOne
	}
	return fsm.Cmd{Op: fsm.OpPutSchedule, PutSchedule: &p}
}

func createSchedule(name, overlap string) fsm.Cmd {
	return putSchedule(fsm.PutSchedule{Name: name, Overlap: overlap, Create: true})
}

func fire(name string, tick time.Time) fsm.Cmd {
	ns := tick.UnixNano()
	return fsm.Cmd{Op: fsm.OpFire, Fire: &fsm.Fire{Name: name, Tick: ns, JobID: fsm.FireJobID(name, ns, false)}}
}

func trigger(name string, at time.Time) fsm.Cmd {
	ns := at.UnixNano()
	return fsm.Cmd{Op: fsm.OpFire, Fire: &fsm.Fire{Name: name, Tick: ns, JobID: fsm.FireJobID(name, ns, true), Manual: true}}
}

func pauseSchedule(name string, paused bool) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpPauseSchedule, PauseSchedule: &fsm.PauseSchedule{Name: name, Paused: paused}}
}

func (h *harness) schedule(name string) *store.Schedule {
	h.t.Helper()
	sc, err := h.f.Schedule(name)
	if err != nil {
		h.t.Fatalf("schedule %s: %v", name, err)
	}
	return sc
}

// noop applies c and fails the test unless it was accepted without
// changing anything at all (digest aside from the applied index).
func (h *harness) noop(c fsm.Cmd) fsm.Result {
	h.t.Helper()
	jobs := jobsJSON(h.t, h.f)
	scheds, _ := h.f.Schedules()
	before, _ := json.Marshal(scheds)
	r := h.ok(c)
	if len(r.Jobs) != 0 {
		h.t.Fatalf("%s at index %d created %v, want nothing", c.Op, h.index, jobIDs(r.Jobs))
	}
	scheds, _ = h.f.Schedules()
	after, _ := json.Marshal(scheds)
	if jobsJSON(h.t, h.f) != jobs || string(after) != string(before) {
		h.t.Fatalf("%s at index %d changed state:\nbefore %s\nafter  %s", c.Op, h.index, before, after)
	}
	return r
}

func TestSchedule(t *testing.T) {
	tick := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }

	t.Run("CreateStartsTicksAtCreation", func(t *testing.T) {
		h := setup(t)
		sc := h.ok(createSchedule("nightly", "")).Schedule
		if sc.LastTick != ns(t0) || sc.CreatedAt != ns(t0) || sc.Runs != 0 {
			t.Fatalf("new schedule %+v, want last tick and creation at t0, no runs", sc)
		}
		h.noop(fire("nightly", t0))                 // at creation: not after it
		h.noop(fire("nightly", t0.Add(-time.Hour))) // before creation
	})

	t.Run("DuplicateNameIsRejected", func(t *testing.T) {
		h := setup(t)
		h.ok(createSchedule("a", ""))
		before := h.schedule("a")
		r := h.reject(putSchedule(fsm.PutSchedule{Name: "a", Cron: "@daily", Create: true}), fsm.ErrConflict)
		if r.Schedule != nil {
			t.Fatalf("rejected create returned a schedule")
		}
		if got := h.schedule("a"); got.Cron != before.Cron || got.ModifyIndex != before.ModifyIndex {
			t.Fatalf("rejected create changed the schedule: %+v", got)
		}
	})

	t.Run("InvalidDefinitionsAreRejected", func(t *testing.T) {
		h := setup(t)
		for _, p := range []fsm.PutSchedule{
			{Name: "", Create: true},
			{Name: "a", Overlap: "sometimes", Create: true},
			{Name: "a", Catchup: "most", Create: true},
			{Name: "a", Job: fsm.NewJob{Command: "x", IdempotencyKey: "k"}, Create: true},
			{Name: "a", Job: fsm.NewJob{Command: "x", DependsOn: []string{"job-1"}}, Create: true},
			{Name: "a", Job: fsm.NewJob{Command: "x", ID: "mine"}, Create: true},
			{Name: "a", Job: fsm.NewJob{Command: "x", RunAt: ns(t0)}, Create: true},
		} {
			var ve *fsm.ValidationError
			r := h.reject(putSchedule(p), nil)
			if !errors.As(r.Err, &ve) {
				t.Errorf("%+v: err %v, want a ValidationError", p, r.Err)
			}
		}
		if s, _ := h.f.Schedules(); len(s) != 0 {
			t.Fatalf("rejected creates left %d schedules", len(s))
		}
		h.reject(putSchedule(fsm.PutSchedule{Name: "missing"}), fsm.ErrScheduleNotFound)
	})

	t.Run("FireCreatesOneJobPerTick", func(t *testing.T) {
		h := setup(t)
		h.ok(createSchedule("a", ""))
		h.at(time.Minute)
		r := h.ok(fire("a", tick(1)))
		if len(r.Jobs) != 1 {
			t.Fatalf("fire created %d jobs, want 1", len(r.Jobs))
		}
		j := r.Jobs[0]
		wantID := "sched-a-" + formatUnix(tick(1))
		if j.ID != wantID || j.Schedule != "a" || j.ScheduledFor != ns(tick(1)) || j.Command != "echo tick" || j.Status != store.StatusPending {
			t.Fatalf("fired job %+v, want id %s of schedule a for tick 1, pending", j, wantID)
		}
		sc := h.schedule("a")
		if sc.LastTick != ns(tick(1)) || sc.LastRun != ns(tick(1)) || sc.LastJobID != j.ID || sc.Runs != 1 {
			t.Fatalf("schedule after fire %+v", sc)
		}
		// The same tick again (a retry after an unknown outcome, or a
		// deposed leader's proposal), and an earlier one: nothing happens.
		h.noop(fire("a", tick(1)))
		h.noop(fire("a", t0.Add(30*time.Second)))
		h.ok(fire("a", tick(3)))
		h.noop(fire("a", tick(2)))
		if n := len(allJobs(t, h.f)); n != 2 {
			t.Fatalf("%d jobs after ticks 1, 1, 0.5, 3, 2; want 2", n)
		}
	})

	t.Run("FireNeedsTheDerivedJobID", func(t *testing.T) {
		h := setup(t)
		h.ok(createSchedule("a", ""))
		c := fire("a", tick(1))
		c.Fire.JobID = "sched-a-other"
		h.reject(c, nil)
		h.reject(fire("missing", tick(1)), fsm.ErrScheduleNotFound)
		if sc := h.schedule("a"); sc.LastTick != ns(t0) {
			t.Fatalf("rejected fires moved LastTick to %d", sc.LastTick)
		}
	})

	t.Run("TickWhoseJobExistsIsAccountedFor", func(t *testing.T) {
		h := setup(t)
		h.ok(createSchedule("a", ""))
		id := fsm.FireJobID("a", ns(tick(1)), false)
		h.submit(fsm.NewJob{ID: id, Command: "made by hand"})
		r := h.ok(fire("a", tick(1)))
		if len(allJobs(t, h.f)) != 1 || h.job(id).Command != "made by hand" {
			t.Fatalf("fire of a tick whose job exists made another job or changed it: %v", jobIDs(allJobs(t, h.f)))
		}
		if r.Schedule.LastTick != ns(tick(1)) {
			t.Fatalf("LastTick %d, want tick 1", r.Schedule.LastTick)
		}
	})

	t.Run("PausedScheduleDoesNotFireAndResumeDropsPausedTicks", func(t *testing.T) {
		h := setup(t)
		h.ok(createSchedule("a", ""))
		h.ok(pauseSchedule("a", true))
		h.noop(fire("a", tick(1)))
		h.at(10 * time.Minute)
		sc := h.ok(pauseSchedule("a", false)).Schedule
		if sc.Paused || sc.LastTick != ns(tick(10)) {
			t.Fatalf("resumed schedule %+v, want LastTick at the resume", sc)
		}
		h.noop(fire("a", tick(5))) // due while paused
		h.ok(fire("a", tick(11)))
	})

	t.Run("OverlapAllowFiresWhilePreviousRuns", func(t *testing.T) {
		h := setup(t)
		h.ok(createSchedule("a", fsm.OverlapAllow))
		j1 := h.ok(fire("a", tick(1))).Jobs[0]
		h.claimOne("w1")
		j2 := h.ok(fire("a", tick(2))).Jobs[0]
		h.status(store.StatusRunning, j1.ID)
		h.status(store.StatusPending, j2.ID)
	})

	t.Run("OverlapSkipSkipsWhilePreviousRunIsUnfinished", func(t *testing.T) {
		h := setup(t)
		h.ok(createSchedule("a", fsm.OverlapSkip))
		j1 := h.ok(fire("a", tick(1))).Jobs[0]
		r := h.ok(fire("a", tick(2))) // j1 pending: unfinished
		if len(r.Jobs) != 0 || r.Schedule.Skipped != 1 || r.Schedule.LastTick != ns(tick(2)) {
			t.Fatalf("tick 2 while run 1 pending: jobs %v, schedule %+v; want skipped", jobIDs(r.Jobs), r.Schedule)
		}
		c := h.claimOne("w1")
		if r := h.ok(fire("a", tick(3))); len(r.Jobs) != 0 {
			t.Fatalf("tick 3 while run 1 runs made %v", jobIDs(r.Jobs))
		}
		h.noop(fire("a", tick(2))) // the skipped tick is spent
		h.reject(trigger("a", tick(3)), fsm.ErrConflict)
		h.ok(succeed(j1.ID, c.Lease))
		if r := h.ok(fire("a", tick(4))); len(r.Jobs) != 1 {
			t.Fatalf("tick 4 after run 1 finished made %d jobs, want 1", len(r.Jobs))
		}
		if sc := h.schedule("a"); sc.Skipped != 2 || sc.Runs != 2 {
			t.Fatalf("schedule %+v, want 2 skipped, 2 runs", sc)
		}
	})

	t.Run("OverlapQueueRunsOneAfterAnotherWhateverTheyEndWith", func(t *testing.T) {
		h := setup(t)
		h.ok(createSchedule("a", fsm.OverlapQueue))
		j1 := h.ok(fire("a", tick(1))).Jobs[0]
		j2 := h.ok(fire("a", tick(2))).Jobs[0]
		j3 := h.ok(fire("a", tick(3))).Jobs[0]
		h.status(store.StatusPending, j1.ID)
		h.status(store.StatusBlocked, j2.ID, j3.ID)
		if h.job(j2.ID).After != j1.ID || h.job(j3.ID).After != j2.ID {
			t.Fatalf("queued runs wait on %q and %q, want %s and %s", h.job(j2.ID).After, h.job(j3.ID).After, j1.ID, j2.ID)
		}
		// Run 1 fails for good: run 2 runs anyway (no cascade).
		c := h.claimOne("w1")
		h.ok(report(fsm.Report{JobID: j1.ID, Lease: c.Lease, Error: "boom", Final: true}))
		h.status(store.StatusFailed, j1.ID)
		h.status(store.StatusPending, j2.ID)
		h.status(store.StatusBlocked, j3.ID)
		// Run 2 is cancelled while it waits to be claimed: run 3 runs.
		h.ok(cancel(j2.ID, true))
		h.status(store.StatusCancelled, j2.ID)
		h.status(store.StatusPending, j3.ID)
		c = h.claimOne("w1")
		if c.ID != j3.ID {
			t.Fatalf("claimed %s, want %s", c.ID, j3.ID)
		}
		// A trigger queues after the latest run too.
		m := h.ok(trigger("a", tick(4))).Jobs[0]
		if m.Status != store.StatusBlocked || m.After != j3.ID {
			t.Fatalf("trigger while run 3 runs: %s after %q, want blocked after %s", m.Status, m.After, j3.ID)
		}
		h.ok(succeed(j3.ID, c.Lease))
		h.status(store.StatusPending, m.ID)
		snapshotRestore(t, h.f)
	})

	t.Run("QueuedRunIsReleasedByAnExpiredLastAttempt", func(t *testing.T) {
		h := setup(t)
		h.ok(createSchedule("a", fsm.OverlapQueue))
		j1 := h.ok(fire("a", tick(1))).Jobs[0]
		j2 := h.ok(fire("a", tick(2))).Jobs[0]
		c := h.claimOne("w1") // max_attempts 1 by default
		h.at(time.Hour)
		h.ok(expire(j1.ID, c.Lease))
		h.status(store.StatusFailed, j1.ID)
		h.status(store.StatusPending, j2.ID)
	})

	t.Run("TriggerRunsNowAndLeavesLastTick", func(t *testing.T) {
		h := setup(t)
		h.ok(createSchedule("a", ""))
		h.ok(fire("a", tick(1)))
		h.at(90 * time.Second)
		r := h.ok(trigger("a", t0.Add(90*time.Second)))
		j := r.Jobs[0]
		if j.ID != fsm.FireJobID("a", ns(t0.Add(90*time.Second)), true) || j.ScheduledFor != ns(t0.Add(90*time.Second)) {
			t.Fatalf("triggered job %s for %d", j.ID, j.ScheduledFor)
		}
		if r.Schedule.LastTick != ns(tick(1)) || r.Schedule.LastJobID != j.ID || r.Schedule.Runs != 2 {
			t.Fatalf("schedule after trigger %+v, want LastTick still tick 1", r.Schedule)
		}
		// The tick due after the trigger still runs.
		if r := h.ok(fire("a", tick(2))); len(r.Jobs) != 1 {
			t.Fatalf("tick 2 after a trigger made %d jobs", len(r.Jobs))
		}
		h.ok(pauseSchedule("a", true))
		if r := h.ok(trigger("a", tick(3))); len(r.Jobs) != 1 {
			t.Fatalf("trigger of a paused schedule made %d jobs, want 1", len(r.Jobs))
		}
	})

	t.Run("SkipFireRecordsMissedTicks", func(t *testing.T) {
		h := setup(t)
		h.ok(createSchedule("a", ""))
		skip := fsm.Cmd{Op: fsm.OpFire, Fire: &fsm.Fire{Name: "a", Tick: ns(tick(9)), Skip: true, Missed: 9}}
		r := h.ok(skip)
		if len(r.Jobs) != 0 || r.Schedule.LastTick != ns(tick(9)) || r.Schedule.Missed != 9 {
			t.Fatalf("skip fire: jobs %v, schedule %+v", jobIDs(r.Jobs), r.Schedule)
		}
		h.noop(skip)
		h.noop(fire("a", tick(5)))
	})

	t.Run("UpdateKeepsProgressAndRestartsTicksOnNewCron", func(t *testing.T) {
		h := setup(t)
		h.ok(createSchedule("a", ""))
		h.ok(fire("a", tick(1)))
		h.at(5 * time.Minute)
		sc := h.ok(putSchedule(fsm.PutSchedule{Name: "a", Cron: "@every 1m", Job: fsm.NewJob{Command: "echo new"}, Overlap: fsm.OverlapQueue})).Schedule
		if sc.LastTick != ns(tick(1)) || sc.Runs != 1 || sc.Overlap != fsm.OverlapQueue {
			t.Fatalf("update with the same cron: %+v, want progress kept", sc)
		}
		if j := h.ok(fire("a", tick(2))).Jobs[0]; j.Command != "echo new" || j.Status != store.StatusBlocked {
			t.Fatalf("tick after update made a %s job running %q, want a queued one running the new command", j.Status, j.Command)
		}
		h.at(10 * time.Minute)
		sc = h.ok(putSchedule(fsm.PutSchedule{Name: "a", Cron: "@every 2m"})).Schedule
		if sc.LastTick != ns(tick(10)) || sc.Runs != 2 || sc.CreatedAt != ns(t0) {
			t.Fatalf("update with a new cron: %+v, want ticks from the update on", sc)
		}
		h.noop(fire("a", tick(8)))
	})

	t.Run("DeleteKeepsJobs", func(t *testing.T) {
		h := setup(t)
		h.ok(createSchedule("a", ""))
		j := h.ok(fire("a", tick(1))).Jobs[0]
		h.ok(fsm.Cmd{Op: fsm.OpDeleteSchedule, DeleteSchedule: &fsm.DeleteSchedule{Name: "a"}})
		if _, err := h.f.Schedule("a"); !errors.Is(err, fsm.ErrScheduleNotFound) {
			t.Fatalf("deleted schedule: err %v", err)
		}
		h.job(j.ID)
		h.reject(fire("a", tick(2)), fsm.ErrScheduleNotFound)
		h.reject(fsm.Cmd{Op: fsm.OpDeleteSchedule, DeleteSchedule: &fsm.DeleteSchedule{Name: "a"}}, fsm.ErrScheduleNotFound)
		h.reject(pauseSchedule("a", true), fsm.ErrScheduleNotFound)
		// Created again, it starts afresh; its ticks are later than the old
		// ones, so their ids never meet.
		h.at(2 * time.Minute)
		h.ok(createSchedule("a", ""))
		h.noop(fire("a", tick(1)))
	})

	t.Run("SnapshotRestoreKeepsSchedules", func(t *testing.T) {
		h := setup(t)
		h.ok(createSchedule("a", fsm.OverlapQueue))
		h.ok(createSchedule("b", fsm.OverlapSkip))
		h.ok(fire("a", tick(1)))
		h.ok(fire("a", tick(2)))
		h.ok(fire("b", tick(1)))
		g := snapshotRestore(t, h.f)
		got, _ := g.Schedules()
		want, _ := h.f.Schedules()
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		if string(gb) != string(wb) {
			t.Fatalf("restored schedules %s, want %s", gb, wb)
		}
	})
}

func formatUnix(t time.Time) string {
	b, _ := json.Marshal(t.Unix())
	return string(b)
}
