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

	t.Run("ACreatePastTheCapIs409AndCreatesNothing", func(t *testing.T) {
		e := setup(t)
		defer func(n int) { maxSchedules = n }(maxSchedules)
		maxSchedules = 2
		e.create(wire.ScheduleRequest{Name: "a", Cron: "@daily", Job: wire.SubmitRequest{Command: "x"}})
		e.create(wire.ScheduleRequest{Name: "b", Cron: "@daily", Job: wire.SubmitRequest{Command: "x"}})
		code, werr := e.do(http.MethodPost, "/schedules", wire.ScheduleRequest{Name: "c", Cron: "@daily", Job: wire.SubmitRequest{Command: "x"}}, nil)
		if code != http.StatusConflict || !strings.Contains(werr.Error, "max_schedules = 2") {
			t.Fatalf("third create: %d %+v, want 409 naming max_schedules = 2", code, werr)
		}
		if code, _ := e.do(http.MethodGet, "/schedules/c", nil, nil); code != http.StatusNotFound {
			t.Errorf("GET /schedules/c after its refused create: %d, want 404", code)
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
