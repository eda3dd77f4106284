package leader

import (
	"context"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/internal/testkit/fsmtest"
	"github.com/workron/workron/raftnode"
	"github.com/workron/workron/store"
)

var schedT0 = time.Date(2025, 1, 10, 12, 0, 0, 0, time.UTC)

// create puts a schedule whose job runs "x" in the default queue; an
// empty timezone, overlap or catch-up takes the API's default.
func (e *env) create(ps fsm.PutSchedule) {
	e.t.Helper()
	if ps.Timezone == "" {
		ps.Timezone = "UTC"
	}
	if ps.Overlap == "" {
		ps.Overlap = fsm.OverlapAllow
	}
	if ps.Catchup == "" {
		ps.Catchup = fsm.CatchupOne
	}
	ps.Job = fsm.NewJob{Command: "x", Queue: "default", MaxAttempts: 3}
	ps.Create = true
	e.propose(fsm.Cmd{Op: fsm.OpPutSchedule, PutSchedule: &ps})
}

// scheduler is a Scheduler over the env; mutate may change its config.
func (e *env) scheduler(mutate func(*SchedulerConfig)) *Scheduler {
	e.t.Helper()
	cfg := DefaultSchedulerConfig()
	cfg.Proposer, cfg.State, cfg.Recorder, cfg.Now = e, e.f, e.rec, e.clock.Now
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := NewScheduler(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// pass runs one scheduler pass, as the leader's loop would.
func (e *env) pass(s *Scheduler) time.Time { return s.runOnce(context.Background()) }

// schedule reads a schedule from the state.
func (e *env) schedule(name string) *store.Schedule {
	e.t.Helper()
	sc, err := e.f.Schedule(name)
	if err != nil {
		e.t.Fatal(err)
	}
	return sc
}

// ticks lists the scheduled_for of a schedule's jobs, oldest first.
func (e *env) ticks(name string) []time.Time {
	e.t.Helper()
	jobs, _, err := e.f.ListJobs(store.ListQuery{Match: func(j *store.Job) bool { return j.Schedule == name }})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []time.Time
	for i := len(jobs) - 1; i >= 0; i-- {
		out = append(out, time.Unix(0, jobs[i].ScheduledFor).UTC())
	}
	return out
}

func TestScheduler(t *testing.T) {
	t.Run("FiresEachTickOnceAsTheClockMoves", func(t *testing.T) {
		e := newEnv(t, schedT0)
		e.create(fsm.PutSchedule{Name: "m", Cron: "@every 1m"})
		s := e.scheduler(nil)
		var want []time.Time
		for i := 1; i <= 5; i++ {
			next := e.pass(s)
			if wantNext := schedT0.Add(time.Duration(i) * time.Minute); !next.Equal(wantNext) {
				t.Fatalf("pass %d: next %s, want %s", i, next, wantNext)
			}
			e.clock.Set(next.Add(20 * time.Millisecond))
			e.pass(s)
			e.pass(s) // a second pass at the same time fires nothing more
			want = append(want, next)
		}
		if got := e.ticks("m"); !equalTimes(got, want) {
			t.Fatalf("ticks %v, want %v", got, want)
		}
		// A new leader (a new scheduler, same state) fires nothing twice.
		if e.pass(e.scheduler(nil)); len(e.ticks("m")) != 5 {
			t.Fatalf("a new leader re-fired: %v", e.ticks("m"))
		}
	})

	t.Run("NewLeaderCatchesUpPerSchedule", func(t *testing.T) {
		e := newEnv(t, schedT0)
		for _, c := range []string{"none", "one", "all"} {
			e.create(fsm.PutSchedule{Name: c, Cron: "@every 1m", Catchup: c})
		}
		// No leader for ten minutes; tick 10 is 5s late (within the grace).
		e.clock.Add(10*time.Minute + 5*time.Second)
		e.pass(e.scheduler(nil))
		for _, c := range []struct {
			name   string
			from   int
			missed uint64
		}{{"none", 10, 9}, {"one", 9, 8}, {"all", 1, 0}} {
			var want []time.Time
			for i := c.from; i <= 10; i++ {
				want = append(want, schedT0.Add(time.Duration(i)*time.Minute))
			}
			if got := e.ticks(c.name); !equalTimes(got, want) {
				t.Errorf("catchup %s: ticks %v, want %v", c.name, got, want)
			}
			sc := e.schedule(c.name)
			if sc.Missed != c.missed || !time.Unix(0, sc.LastTick).Equal(schedT0.Add(10*time.Minute)) {
				t.Errorf("catchup %s: missed %d, last tick %v; want %d missed, last tick 10", c.name, sc.Missed, sc.LastTick, c.missed)
			}
		}
	})

	t.Run("CatchupAllIsCapped", func(t *testing.T) {
		e := newEnv(t, schedT0)
		e.create(fsm.PutSchedule{Name: "all", Cron: "@every 1m", Catchup: "all"})
		e.clock.Add(10 * time.Minute)
		e.pass(e.scheduler(func(c *SchedulerConfig) { c.MaxCatchup = 3 }))
		if got := e.ticks("all"); len(got) != 4 || !got[0].Equal(schedT0.Add(7*time.Minute)) {
			t.Fatalf("ticks %v, want the 3 latest missed (7, 8, 9) and the due one (10)", got)
		}
	})

	t.Run("PausedSchedulesDoNotFire", func(t *testing.T) {
		e := newEnv(t, schedT0)
		e.create(fsm.PutSchedule{Name: "p", Cron: "@every 1m", Paused: true})
		e.clock.Add(time.Hour)
		if next := e.pass(e.scheduler(nil)); !next.IsZero() || len(e.ticks("p")) != 0 {
			t.Fatalf("paused schedule: next %s, ticks %v", next, e.ticks("p"))
		}
	})

	t.Run("OverlapSkipIsEnforcedAcrossTicks", func(t *testing.T) {
		e := newEnv(t, schedT0)
		e.create(fsm.PutSchedule{Name: "s", Cron: "@every 1m", Overlap: "skip"})
		s := e.scheduler(nil)
		for range 3 {
			e.clock.Add(time.Minute)
			e.pass(s)
		}
		sc := e.schedule("s")
		if len(e.ticks("s")) != 1 || sc.Skipped != 2 {
			t.Fatalf("3 ticks with the first run never claimed: %d jobs, %d skipped; want 1 and 2", len(e.ticks("s")), sc.Skipped)
		}
	})
}

// olderMember is a proposer whose cluster has a member of protocol 2: it
// refuses, as raftnode does, every command that needs more.
type olderMember struct {
	*env
	refused int
}

func (p *olderMember) Propose(ctx context.Context, cmd fsm.Cmd) (fsm.Result, error) {
	if need := cmd.Protocol(); need > 2 {
		p.refused++
		return fsm.Result{}, &raftnode.NeedsUpgradeError{Op: cmd.Op, Need: need, Cluster: 2}
	}
	return p.env.Propose(ctx, cmd)
}

func TestSchedulerTraces(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	firedJob := func(e *env, name string) *store.Job {
		e.t.Helper()
		jobs, _, err := e.f.ListJobs(store.ListQuery{Match: func(j *store.Job) bool { return j.Schedule == name }})
		if err != nil || len(jobs) != 1 {
			e.t.Fatalf("schedule %s made %d jobs (%v), want 1", name, len(jobs), err)
		}
		return jobs[0]
	}

	t.Run("AFiredJobStoresTheTraceTheRecorderStarts", func(t *testing.T) {
		e := newEnv(t, schedT0)
		e.rec.trace = tp
		e.create(fsm.PutSchedule{Name: "m", Cron: "@every 1m"})
		e.clock.Add(time.Minute)
		e.pass(e.scheduler(nil))
		if j := firedJob(e, "m"); j.TraceParent != tp {
			t.Fatalf("fired job %s stores trace %q, want the recorder's %q", j.ID, j.TraceParent, tp)
		}
		if len(e.rec.fireEnds) != 1 || e.rec.fireEnds[0] != nil {
			t.Fatalf("the fire's trace was ended with %v, want once without error", e.rec.fireEnds)
		}
	})

	t.Run("AFireTheClusterRefusesForItsTraceGoesWithout", func(t *testing.T) {
		e := newEnv(t, schedT0)
		e.rec.trace = tp
		e.create(fsm.PutSchedule{Name: "m", Cron: "@every 1m"})
		e.clock.Add(time.Minute)
		p := &olderMember{env: e}
		e.pass(e.scheduler(func(c *SchedulerConfig) { c.Proposer = p }))
		if j := firedJob(e, "m"); j.TraceParent != "" || p.refused != 1 {
			t.Fatalf("fired job %s stores trace %q after %d refusals, want none after 1", j.ID, j.TraceParent, p.refused)
		}
		if sc := e.schedule("m"); !time.Unix(0, sc.LastTick).Equal(schedT0.Add(time.Minute)) || sc.Runs != 1 {
			t.Fatalf("schedule: last tick %v, %d runs; want the tick run once", time.Unix(0, sc.LastTick), sc.Runs)
		}
	})
}

// TestSchedulerDST drives the leader's loop with a fixed clock stepped
// through both of 2025's transitions in Europe/Paris and counts the runs.
func TestSchedulerDST(t *testing.T) {
	for _, c := range []struct {
		name, expr, from, to string
		want                 []string
	}{
		{"SpringForwardNeitherSkipsNorDoubles", "30 2 * * *", "2025-03-29T00:00:00+01:00", "2025-04-01T00:00:00+02:00",
			[]string{"2025-03-29T02:30:00+01:00", "2025-03-30T03:00:00+02:00", "2025-03-31T02:30:00+02:00"}},
		{"FallBackNeitherSkipsNorDoubles", "30 2 * * *", "2025-10-25T00:00:00+02:00", "2025-10-28T00:00:00+01:00",
			[]string{"2025-10-25T02:30:00+02:00", "2025-10-26T02:30:00+02:00", "2025-10-27T02:30:00+01:00"}},
		{"HourlyFollowsRealTimeAtFallBack", "0 * * * *", "2025-10-26T00:30:00+02:00", "2025-10-26T04:30:00+01:00",
			[]string{"2025-10-26T01:00:00+02:00", "2025-10-26T02:00:00+02:00", "2025-10-26T02:00:00+01:00", "2025-10-26T03:00:00+01:00", "2025-10-26T04:00:00+01:00"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			from, to := fsmtest.Time(t, c.from), fsmtest.Time(t, c.to)
			e := newEnv(t, from)
			e.create(fsm.PutSchedule{Name: "dst", Cron: c.expr, Timezone: "Europe/Paris", Catchup: "none"})
			// Step like the loop does: wake just after each next tick, and
			// at least every 10 minutes.
			s := e.scheduler(nil)
			for e.clock.Now().Before(to) {
				step := e.clock.Now().Add(10 * time.Minute)
				if next := e.pass(s); !next.IsZero() && next.Before(step) {
					step = next.Add(300 * time.Millisecond)
				}
				e.clock.Set(step)
			}
			e.pass(s)
			var want []time.Time
			for _, w := range c.want {
				want = append(want, fsmtest.Time(t, w).UTC())
			}
			if got := e.ticks("dst"); !equalTimes(got, want) {
				t.Fatalf("ticks %v, want %v", got, want)
			}
		})
	}
}

func equalTimes(a, b []time.Time) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}
