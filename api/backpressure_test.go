package api

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

// TestBackpressureAPI covers a report's rate_limited_for and snooze_for,
// and a queue's key_weights: what they do, what GET /queues and a job's
// waiting then show, and the 400s of bad values.
func TestBackpressureAPI(t *testing.T) {
	setup := func(t *testing.T) *schedEnv { return newSchedEnv(t, schedT0, nil) }
	submit := func(e *schedEnv, req wire.SubmitRequest) wire.Job {
		t.Helper()
		var j wire.Job
		if code, werr := e.do(http.MethodPost, "/jobs", req, &j); code != http.StatusCreated && code != http.StatusOK {
			t.Fatalf("submit: %d %+v", code, werr)
		}
		return j
	}
	claim := func(e *schedEnv, worker string, n int) []wire.Job {
		t.Helper()
		var res wire.ClaimResponse
		if code, werr := e.do(http.MethodPost, "/jobs/claim", wire.ClaimRequest{WorkerID: worker, Max: n}, &res); code != http.StatusOK {
			t.Fatalf("claim: %d %+v", code, werr)
		}
		return res.Jobs
	}

	t.Run("RateLimitedPausesTheKeyAndShowsIt", func(t *testing.T) {
		e := setup(t)
		a := submit(e, wire.SubmitRequest{Command: "x", ConcurrencyKey: "acme", MaxAttempts: wire.Limit(1)})
		b := submit(e, wire.SubmitRequest{Command: "x", ConcurrencyKey: "acme"})
		c := submit(e, wire.SubmitRequest{Command: "x", ConcurrencyKey: "beta"})
		got := claim(e, "w1", 1)
		if len(got) != 1 || got[0].ID != a.ID {
			t.Fatalf("claimed %+v, want %s", got, a.ID)
		}
		var j wire.Job
		if code, werr := e.do(http.MethodPost, "/jobs/"+a.ID+"/fail", wire.ReportRequest{Lease: got[0].Lease, Error: "429 Too Many Requests", RateLimitedFor: "90s"}, &j); code != http.StatusOK {
			t.Fatalf("fail rate-limited: %d %+v", code, werr)
		}
		if j.Status != wire.StatusPending || j.Attempts != 0 {
			t.Errorf("after rate-limited: %s with %d attempts, want pending with 0", j.Status, j.Attempts)
		}
		if h := j.AttemptHistory; len(h) != 1 || h[0].Status != wire.AttemptRateLimited {
			t.Errorf("history %+v, want one rate_limited attempt", h)
		}
		until := schedT0.Add(90 * time.Second).UTC()
		e.do(http.MethodGet, "/jobs/"+b.ID, nil, &j)
		if want := "key acme rate-limited until " + until.Format(time.RFC3339Nano) + " (429 Too Many Requests)"; j.Waiting != want || j.WaitingCode != wire.WaitLimit {
			t.Errorf("waiting %q (%s), want %q", j.Waiting, j.WaitingCode, want)
		}
		if got := claim(e, "w2", 5); len(got) != 1 || got[0].ID != c.ID {
			t.Fatalf("another worker claimed %+v while acme is paused, want beta's %s only", got, c.ID)
		}
		var q wire.Queue
		e.do(http.MethodGet, "/queues/default", nil, &q)
		if q.Limits == nil || len(q.Limits.Paused) != 1 || q.Limits.Paused[0].Key != "acme" || !q.Limits.Paused[0].Until.Equal(until) ||
			q.Limits.Paused[0].Reason != "429 Too Many Requests" || q.Limits.Waiting["key_paused"] != 2 {
			t.Fatalf("GET /queues/default %+v, want acme paused until %s holding 2", q.Limits, until)
		}
		e.clock.Add(90 * time.Second)
		if got := claim(e, "w2", 5); len(got) != 2 {
			t.Fatalf("claimed %d after the pause, want acme's 2", len(got))
		}
	})

	t.Run("SnoozeRunsTheJobLaterUsingNoAttempt", func(t *testing.T) {
		e := setup(t)
		a := submit(e, wire.SubmitRequest{Command: "x", MaxAttempts: wire.Limit(1)})
		got := claim(e, "w", 1)
		var j wire.Job
		if code, werr := e.do(http.MethodPost, "/jobs/reports", wire.BatchReportRequest{Reports: []wire.BatchReport{
			{JobID: a.ID, Status: wire.StatusFailed, ReportRequest: wire.ReportRequest{Lease: got[0].Lease, SnoozeFor: "5m"}},
		}}, nil); code != http.StatusOK {
			t.Fatalf("batch snooze: %d %+v", code, werr)
		}
		e.do(http.MethodGet, "/jobs/"+a.ID, nil, &j)
		if j.Status != wire.StatusScheduled || j.Attempts != 0 || len(j.AttemptHistory) != 1 || j.AttemptHistory[0].Status != wire.AttemptSnoozed {
			t.Fatalf("after a snooze: %s, %d attempts, history %+v", j.Status, j.Attempts, j.AttemptHistory)
		}
		if !strings.HasPrefix(j.Waiting, "snoozed by attempt 1; runs at ") {
			t.Errorf("waiting %q", j.Waiting)
		}
		var q wire.Queue
		if e.do(http.MethodGet, "/queues/default", nil, &q); q.Limits != nil {
			t.Errorf("a snooze paused the queue: %+v", q.Limits)
		}
	})

	t.Run("KeyWeightsAreSetAndShown", func(t *testing.T) {
		e := setup(t)
		var q wire.Queue
		if code, werr := e.do(http.MethodPut, "/queues/q", wire.QueueLimits{KeyWeights: map[string]int{"acme": 3}}, &q); code != http.StatusOK {
			t.Fatalf("PUT key_weights: %d %+v", code, werr)
		}
		if q.Limits == nil || q.Limits.KeyWeights["acme"] != 3 {
			t.Fatalf("PUT reply %+v", q.Limits)
		}
	})

	t.Run("BadInputIs400NamingTheFieldAndChangesNothing", func(t *testing.T) {
		e := setup(t)
		a := submit(e, wire.SubmitRequest{Command: "x"})
		lease := claim(e, "w", 1)[0].Lease
		before := e.digest()
		long := strings.Repeat("k", wire.MaxConcurrencyKeyBytes+1)
		for _, c := range []struct {
			method, path string
			body         any
			field        string
		}{
			{http.MethodPost, "/jobs/" + a.ID + "/fail", wire.ReportRequest{Lease: lease, RateLimitedFor: "soon"}, "rate_limited_for"},
			{http.MethodPost, "/jobs/" + a.ID + "/fail", wire.ReportRequest{Lease: lease, RateLimitedFor: "25h"}, "rate_limited_for"},
			{http.MethodPost, "/jobs/" + a.ID + "/fail", wire.ReportRequest{Lease: lease, RateLimitedFor: "-1s"}, "rate_limited_for"},
			{http.MethodPost, "/jobs/" + a.ID + "/fail", wire.ReportRequest{Lease: lease, SnoozeFor: "0s"}, "snooze_for"},
			{http.MethodPost, "/jobs/" + a.ID + "/fail", wire.ReportRequest{Lease: lease, SnoozeFor: "1s", RateLimitedFor: "1s"}, "snooze_for"},
			{http.MethodPost, "/jobs/" + a.ID + "/done", wire.ReportRequest{Lease: lease, SnoozeFor: "1s"}, "snooze_for"},
			{http.MethodPost, "/jobs/reports", wire.BatchReportRequest{Reports: []wire.BatchReport{{JobID: a.ID, Status: wire.StatusDone, ReportRequest: wire.ReportRequest{RateLimitedFor: "1s"}}}}, "reports[0].rate_limited_for"},
			{http.MethodPut, "/queues/q", `{"key_weights": {"a": 0}}`, "key_weights"},
			{http.MethodPut, "/queues/q", `{"key_weights": {"a": 1001}}`, "key_weights"},
			{http.MethodPut, "/queues/q", `{"key_weights": {"": 2}}`, "key_weights"},
			{http.MethodPut, "/queues/q", `{"key_weights": {"` + long + `": 2}}`, "key_weights"},
		} {
			code, werr := e.do(c.method, c.path, c.body, nil)
			if code != http.StatusBadRequest || werr.Code != wire.CodeInvalid || !strings.Contains(werr.Error, c.field) {
				t.Errorf("%s %s %v: %d %+v, want 400 naming %s", c.method, c.path, c.body, code, werr, c.field)
			}
		}
		if e.digest() != before {
			t.Error("rejected requests changed the state")
		}
	})
}
