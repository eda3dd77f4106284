package api

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

var schedT0 = time.Date(2025, 1, 10, 12, 0, 0, 0, time.UTC)

func TestScheduleAPI(t *testing.T) {
	setup := func(t *testing.T) *schedEnv { return newSchedEnv(t, schedT0, nil) }
	every := wire.ScheduleRequest{Name: "tick", Cron: "@every 1m", Job: wire.SubmitRequest{Command: "echo tick"}}

	t.Run("CreateReturnsTheScheduleWithItsNextRun", func(t *testing.T) {
		e := setup(t)
		sc := e.create(wire.ScheduleRequest{Name: "nightly", Cron: "30 2 * * *", Timezone: "Europe/Paris", Job: wire.SubmitRequest{Command: "backup", Queue: "ops"}})
		want := time.Date(2025, 1, 11, 1, 30, 0, 0, time.UTC)
		if sc.NextRun == nil || !sc.NextRun.Equal(want) {
			t.Fatalf("next_run %v, want %s", sc.NextRun, want)
		}
		if sc.Overlap != "allow" || sc.Catchup != "one" || sc.Paused || sc.Job.Command != "backup" || sc.Job.Queue != "ops" || sc.Timezone != "Europe/Paris" {
			t.Fatalf("created schedule %+v", sc)
		}
		var got wire.Schedule
		if code, _ := e.do(http.MethodGet, "/schedules/nightly", nil, &got); code != http.StatusOK || got.Name != "nightly" || got.Cron != "30 2 * * *" {
			t.Fatalf("GET: %d %+v", code, got)
		}
		var list wire.ScheduleList
		e.create(every)
		if code, _ := e.do(http.MethodGet, "/schedules", nil, &list); code != http.StatusOK || len(list.Schedules) != 2 || list.Schedules[0].Name != "nightly" {
			t.Fatalf("list: %d %+v", code, list)
		}
	})

	t.Run("BadInputIs400AndChangesNothing", func(t *testing.T) {
		e := setup(t)
		e.create(every)
		for _, c := range []struct {
			body  any
			field string
		}{
			{wire.ScheduleRequest{Name: "a", Cron: "*/5 * * *", Job: every.Job}, "cron"},
			{wire.ScheduleRequest{Name: "a", Cron: "every day", Job: every.Job}, "cron"},
			{wire.ScheduleRequest{Name: "a", Cron: "0 0 30 2 *", Job: every.Job}, "cron"}, // never fires
			{wire.ScheduleRequest{Name: "a", Cron: "@every 100ms", Job: every.Job}, "cron"},
			{wire.ScheduleRequest{Name: "a", Cron: "@daily", Timezone: "Europe/Pariss", Job: every.Job}, "timezone"},
			{wire.ScheduleRequest{Name: "a", Cron: "@daily", Overlap: "never", Job: every.Job}, "overlap"},
			{wire.ScheduleRequest{Name: "a", Cron: "@daily", Catchup: "some", Job: every.Job}, "catchup"},
			{wire.ScheduleRequest{Name: "", Cron: "@daily", Job: every.Job}, "name"},
			{wire.ScheduleRequest{Name: "a b", Cron: "@daily", Job: every.Job}, "name"},
			{wire.ScheduleRequest{Name: "a", Cron: "@daily"}, "job.command"},
			{wire.ScheduleRequest{Name: "a", Cron: "@daily", Job: wire.SubmitRequest{Command: "x", Priority: 1 << 30}}, "job.priority"},
			{wire.ScheduleRequest{Name: "a", Cron: "@daily", Job: wire.SubmitRequest{Command: "x", Timeout: "soon"}}, "job.timeout"},
			{wire.ScheduleRequest{Name: "a", Cron: "@daily", Job: wire.SubmitRequest{Command: "x", Delay: "5m"}}, "job.delay"},
			{wire.ScheduleRequest{Name: "a", Cron: "@daily", Job: wire.SubmitRequest{Command: "x", IdempotencyKey: "k"}}, "job.idempotency_key"},
			{wire.ScheduleRequest{Name: "a", Cron: "@daily", Job: wire.SubmitRequest{Command: "x", DependsOn: []string{"job-1"}}}, "job.depends_on"},
			{`{"name": "a", "cron": 5}`, "cron"},
			{`{"name": "a",`, ""},
		} {
			code, werr := e.do(http.MethodPost, "/schedules", c.body, nil)
			if code != http.StatusBadRequest || werr.Code != "invalid" || !strings.Contains(werr.Error, c.field) {
				t.Errorf("POST %+v: %d %+v, want 400 invalid naming %q", c.body, code, werr, c.field)
			}
		}
		// Duplicate name: 409, and the original stays as it was.
		dup := every
		dup.Cron = "@daily"
		if code, werr := e.do(http.MethodPost, "/schedules", dup, nil); code != http.StatusConflict || werr.Code != "conflict" {
			t.Errorf("duplicate name: %d %+v, want 409 conflict", code, werr)
		}
		// Bad updates, of an existing schedule and of a missing one.
		if code, werr := e.do(http.MethodPut, "/schedules/tick", wire.ScheduleRequest{Cron: "@every 1x", Job: every.Job}, nil); code != http.StatusBadRequest || !strings.Contains(werr.Error, "cron") {
			t.Errorf("PUT with a bad cron: %d %+v", code, werr)
		}
		if code, werr := e.do(http.MethodPut, "/schedules/tick", wire.ScheduleRequest{Name: "other", Cron: "@daily", Job: every.Job}, nil); code != http.StatusBadRequest || !strings.Contains(werr.Error, "name") {
			t.Errorf("PUT naming another schedule: %d %+v", code, werr)
		}
		if code, _ := e.do(http.MethodPut, "/schedules/missing", wire.ScheduleRequest{Cron: "@daily", Job: every.Job}, nil); code != http.StatusNotFound {
			t.Errorf("PUT of a missing schedule: %d, want 404", code)
		}
		for _, path := range []string{"/schedules/missing/pause", "/schedules/missing/resume", "/schedules/missing/trigger"} {
			if code, _ := e.do(http.MethodPost, path, nil, nil); code != http.StatusNotFound {
				t.Errorf("POST %s: %d, want 404", path, code)
			}
		}
		if code, _ := e.do(http.MethodDelete, "/schedules/missing", nil, nil); code != http.StatusNotFound {
			t.Errorf("DELETE of a missing schedule: %d, want 404", code)
		}
		if code, _ := e.do(http.MethodGet, "/schedules/missing", nil, nil); code != http.StatusNotFound {
			t.Errorf("GET of a missing schedule: %d, want 404", code)
		}
		// The duplicate and the missing names were refused by the FSM: the
		// schedule is as it was.
		var sc wire.Schedule
		e.do(http.MethodGet, "/schedules/tick", nil, &sc)
		if sc.Cron != "@every 1m" || sc.Runs != 0 {
			t.Fatalf("schedule after bad requests: %+v", sc)
		}
		if n := len(e.scheduledJobs("tick")); n != 0 {
			t.Fatalf("bad requests made %d jobs", n)
		}
	})

	t.Run("RefusedRequestsNeverReachTheLog", func(t *testing.T) {
		e := setup(t)
		before, applied := e.digest(), e.srv.state.Applied()
		e.do(http.MethodPost, "/schedules", wire.ScheduleRequest{Name: "a", Cron: "nope", Job: every.Job}, nil)
		e.do(http.MethodPost, "/schedules", wire.ScheduleRequest{Name: "a", Cron: "@daily", Timezone: "Nowhere/Town", Job: every.Job}, nil)
		e.do(http.MethodPost, "/schedules", wire.ScheduleRequest{Name: "a", Cron: "@daily", Job: wire.SubmitRequest{Command: "x", MaxAttempts: new(int)}}, nil)
		if e.digest() != before || e.srv.state.Applied() != applied {
			t.Fatal("a request refused by validation changed the state or reached the log")
		}
	})

	t.Run("UpdateReplacesTheDefinition", func(t *testing.T) {
		e := setup(t)
		e.create(every)
		upd := wire.ScheduleRequest{Cron: "0 9 * * 1-5", Timezone: "America/New_York", Job: wire.SubmitRequest{Command: "report"}, Overlap: "skip", Catchup: "none"}
		var sc wire.Schedule
		if code, werr := e.do(http.MethodPut, "/schedules/tick", upd, &sc); code != http.StatusOK {
			t.Fatalf("PUT: %d %+v", code, werr)
		}
		if sc.Cron != upd.Cron || sc.Timezone != upd.Timezone || sc.Job.Command != "report" || sc.Overlap != "skip" || sc.Catchup != "none" {
			t.Fatalf("updated schedule %+v", sc)
		}
		if want := time.Date(2025, 1, 10, 14, 0, 0, 0, time.UTC); sc.NextRun == nil || !sc.NextRun.Equal(want) {
			t.Fatalf("next_run %v, want %s (9:00 in New York)", sc.NextRun, want)
		}
	})

	t.Run("PauseResumeTriggerDelete", func(t *testing.T) {
		e := setup(t)
		e.create(every)
		var sc wire.Schedule
		if code, _ := e.do(http.MethodPost, "/schedules/tick/pause", nil, &sc); code != http.StatusOK || !sc.Paused || sc.NextRun != nil {
			t.Fatalf("pause: %d %+v", code, sc)
		}
		var j wire.Job
		if code, werr := e.do(http.MethodPost, "/schedules/tick/trigger", nil, &j); code != http.StatusCreated {
			t.Fatalf("trigger: %d %+v", code, werr)
		}
		if j.Schedule != "tick" || j.ScheduledFor == nil || !j.ScheduledFor.Equal(schedT0) || !strings.HasPrefix(j.ID, "sched-tick-manual-") {
			t.Fatalf("triggered job %+v", j)
		}
		var got wire.Job
		if code, _ := e.do(http.MethodGet, "/jobs/"+j.ID, nil, &got); code != http.StatusOK || got.Schedule != "tick" || got.ScheduledFor == nil {
			t.Fatalf("GET of the triggered job: %d %+v", code, got)
		}
		if code, _ := e.do(http.MethodPost, "/schedules/tick/resume", nil, &sc); code != http.StatusOK || sc.Paused || sc.NextRun == nil {
			t.Fatalf("resume: %d %+v", code, sc)
		}
		if sc.LastJobID != j.ID || sc.LastJobStatus != "pending" || sc.Runs != 1 || sc.LastRun == nil {
			t.Fatalf("schedule after a trigger: %+v", sc)
		}
		if code, _ := e.do(http.MethodDelete, "/schedules/tick", nil, nil); code != http.StatusNoContent {
			t.Fatalf("delete: %d", code)
		}
		if code, _ := e.do(http.MethodGet, "/schedules/tick", nil, nil); code != http.StatusNotFound {
			t.Fatalf("GET after delete: %d", code)
		}
		if code, _ := e.do(http.MethodGet, "/jobs/"+j.ID, nil, nil); code != http.StatusOK {
			t.Fatalf("the schedule's job went with it: %d", code)
		}
	})

	t.Run("TriggerOfASkippingScheduleWhileItRunsIs409", func(t *testing.T) {
		e := setup(t)
		req := every
		req.Overlap = "skip"
		e.create(req)
		if code, _ := e.do(http.MethodPost, "/schedules/tick/trigger", nil, nil); code != http.StatusCreated {
			t.Fatalf("first trigger: %d", code)
		}
		e.clock.Add(time.Second)
		if code, werr := e.do(http.MethodPost, "/schedules/tick/trigger", nil, nil); code != http.StatusConflict {
			t.Fatalf("trigger while the last run is pending: %d %+v, want 409", code, werr)
		}
	})
}

func TestScheduler(t *testing.T) {
	t.Run("FiresEachTickOnceAsTheClockMoves", func(t *testing.T) {
		e := newSchedEnv(t, schedT0, nil)
		e.create(wire.ScheduleRequest{Name: "m", Cron: "@every 1m", Job: wire.SubmitRequest{Command: "x"}})
		s := &scheduler{s: e.srv}
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
		if e.pass(&scheduler{s: e.srv}); len(e.ticks("m")) != 5 {
			t.Fatalf("a new leader re-fired: %v", e.ticks("m"))
		}
	})

	t.Run("NewLeaderCatchesUpPerSchedule", func(t *testing.T) {
		e := newSchedEnv(t, schedT0, nil)
		for _, c := range []string{"none", "one", "all"} {
			e.create(wire.ScheduleRequest{Name: c, Cron: "@every 1m", Catchup: c, Job: wire.SubmitRequest{Command: "x"}})
		}
		// No leader for ten minutes; tick 10 is 5s late (within the grace).
		e.clock.Add(10*time.Minute + 5*time.Second)
		e.pass(&scheduler{s: e.srv})
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
			var sc wire.Schedule
			e.do(http.MethodGet, "/schedules/"+c.name, nil, &sc)
			if sc.Missed != c.missed || !sc.LastTick.Equal(schedT0.Add(10*time.Minute)) {
				t.Errorf("catchup %s: missed %d, last tick %v; want %d missed, last tick 10", c.name, sc.Missed, sc.LastTick, c.missed)
			}
		}
	})

	t.Run("CatchupAllIsCapped", func(t *testing.T) {
		e := newSchedEnv(t, schedT0, func(c *Config) { c.ScheduleMaxCatchup = 3 })
		e.create(wire.ScheduleRequest{Name: "all", Cron: "@every 1m", Catchup: "all", Job: wire.SubmitRequest{Command: "x"}})
		e.clock.Add(10 * time.Minute)
		e.pass(&scheduler{s: e.srv})
		if got := e.ticks("all"); len(got) != 4 || !got[0].Equal(schedT0.Add(7*time.Minute)) {
			t.Fatalf("ticks %v, want the 3 latest missed (7, 8, 9) and the due one (10)", got)
		}
	})

	t.Run("PausedSchedulesDoNotFire", func(t *testing.T) {
		e := newSchedEnv(t, schedT0, nil)
		e.create(wire.ScheduleRequest{Name: "p", Cron: "@every 1m", Paused: true, Job: wire.SubmitRequest{Command: "x"}})
		e.clock.Add(time.Hour)
		if next := e.pass(&scheduler{s: e.srv}); !next.IsZero() || len(e.ticks("p")) != 0 {
			t.Fatalf("paused schedule: next %s, ticks %v", next, e.ticks("p"))
		}
	})

	t.Run("OverlapSkipIsEnforcedAcrossTicks", func(t *testing.T) {
		e := newSchedEnv(t, schedT0, nil)
		e.create(wire.ScheduleRequest{Name: "s", Cron: "@every 1m", Overlap: "skip", Job: wire.SubmitRequest{Command: "x"}})
		s := &scheduler{s: e.srv}
		for range 3 {
			e.clock.Add(time.Minute)
			e.pass(s)
		}
		var sc wire.Schedule
		e.do(http.MethodGet, "/schedules/s", nil, &sc)
		if len(e.ticks("s")) != 1 || sc.Skipped != 2 {
			t.Fatalf("3 ticks with the first run never claimed: %d jobs, %d skipped; want 1 and 2", len(e.ticks("s")), sc.Skipped)
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
			from, to := mustTime(t, c.from), mustTime(t, c.to)
			e := newSchedEnv(t, from, nil)
			e.create(wire.ScheduleRequest{Name: "dst", Cron: c.expr, Timezone: "Europe/Paris", Catchup: "none", Job: wire.SubmitRequest{Command: "x"}})
			// Step like the loop does: wake just after each next tick, and
			// at least every 10 minutes.
			s := &scheduler{s: e.srv}
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
				want = append(want, mustTime(t, w).UTC())
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
