package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
)

func TestQueueLimitsAPI(t *testing.T) {
	setup := func(t *testing.T) *schedEnv { return newSchedEnv(t, schedT0, nil) }
	limits := func(conc, keyConc int, rate string) wire.QueueLimits {
		return wire.QueueLimits{Concurrency: wire.Limit(conc), KeyConcurrency: wire.Limit(keyConc), Rate: rate}
	}
	submit := func(e *schedEnv, req wire.SubmitRequest) wire.Job {
		t.Helper()
		var j wire.Job
		if code, werr := e.do(http.MethodPost, "/jobs", req, &j); code != http.StatusCreated && code != http.StatusOK {
			t.Fatalf("submit: %d %+v", code, werr)
		}
		return j
	}
	claim := func(e *schedEnv, queue string, n int) int {
		t.Helper()
		res, err := e.node.Propose(context.Background(), fsm.Cmd{Op: fsm.OpClaim, Claim: &fsm.Claim{WorkerID: "w", Queues: []string{queue}, Max: n, LeaseTTL: 1e10}})
		if err != nil || res.Err != nil {
			t.Fatalf("claim: %v %v", err, res.Err)
		}
		return len(res.Jobs)
	}

	t.Run("LimitsAreSetAheadAndShownWithWhatTheyHold", func(t *testing.T) {
		e := setup(t)
		var q wire.Queue
		if code, werr := e.do(http.MethodPut, "/queues/emails", wire.QueueLimits{Concurrency: wire.Limit(1), Rate: "600/m", Burst: wire.Limit(5), KeyRate: "10/s"}, &q); code != http.StatusOK {
			t.Fatalf("PUT: %d %+v", code, werr)
		}
		if q.Limits == nil || *q.Limits.Concurrency != 1 || q.Limits.Rate != "600/m" || *q.Limits.Burst != 5 || q.Limits.KeyRate != "10/s" {
			t.Fatalf("PUT reply %+v", q.Limits)
		}
		var list wire.QueueList
		if code, _ := e.do(http.MethodGet, "/queues", nil, &list); code != http.StatusOK || len(list.Queues) != 1 || list.Queues[0].Limits == nil {
			t.Fatalf("GET /queues of a queue with limits and no jobs: %d %+v", code, list)
		}
		a := submit(e, wire.SubmitRequest{Command: "send", Queue: "emails", ConcurrencyKey: "acme"})
		b := submit(e, wire.SubmitRequest{Command: "send", Queue: "emails", ConcurrencyKey: "acme"})
		if a.ConcurrencyKey != "acme" {
			t.Errorf("submitted job shows key %q", a.ConcurrencyKey)
		}
		if n := claim(e, "emails", 5); n != 1 {
			t.Fatalf("claimed %d, want 1", n)
		}
		var got wire.Job
		e.do(http.MethodGet, "/jobs/"+b.ID, nil, &got)
		if got.Waiting != "queue emails at its limit 1/1" || got.WaitingCode != wire.WaitLimit {
			t.Errorf("waiting %q (%s)", got.Waiting, got.WaitingCode)
		}
		e.do(http.MethodGet, "/queues/emails", nil, &q)
		if q.Limits == nil || q.Limits.Running != 1 || q.Limits.Waiting["concurrency"] != 1 {
			t.Errorf("GET /queues/emails limits %+v", q.Limits)
		}
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		body, _ := io.ReadAll(rec.Body)
		if !strings.Contains(string(body), `workron_queue_jobs_held{limit="concurrency",queue="emails"} 1`) {
			t.Errorf("metrics lack the held job:\n%s", grepLines(string(body), "held"))
		}
		// {} removes the limits: the held job goes.
		e.do(http.MethodPut, "/queues/emails", wire.QueueLimits{}, &q)
		if n := claim(e, "emails", 5); n != 1 {
			t.Fatalf("claimed %d after removing the limits, want 1", n)
		}
	})

	t.Run("KeyWaitsSayWhich", func(t *testing.T) {
		e := setup(t)
		e.do(http.MethodPut, "/queues/default", limits(0, 1, ""), nil)
		submit(e, wire.SubmitRequest{Command: "x", ConcurrencyKey: "acme"})
		b := submit(e, wire.SubmitRequest{Command: "x", ConcurrencyKey: "acme"})
		claim(e, "default", 5)
		var got wire.Job
		e.do(http.MethodGet, "/jobs/"+b.ID, nil, &got)
		if got.Waiting != "key acme at its limit 1/1" {
			t.Errorf("waiting %q", got.Waiting)
		}
	})

	t.Run("UnknownQueueIs404", func(t *testing.T) {
		e := setup(t)
		if code, werr := e.do(http.MethodGet, "/queues/nope", nil, nil); code != http.StatusNotFound {
			t.Errorf("GET /queues/nope: %d %+v", code, werr)
		}
	})

	t.Run("BadInputIs400NamingTheFieldAndChangesNothing", func(t *testing.T) {
		e := setup(t)
		before := e.digest()
		long := strings.Repeat("k", wire.MaxConcurrencyKeyBytes+1)
		for _, c := range []struct {
			method, path string
			body         any
			field        string
		}{
			{http.MethodPut, "/queues/q", `{"concurrency": 0}`, "concurrency"},
			{http.MethodPut, "/queues/q", `{"concurrency": -1}`, "concurrency"},
			{http.MethodPut, "/queues/q", `{"key_concurrency": -3}`, "key_concurrency"},
			{http.MethodPut, "/queues/q", `{"rate": "fast"}`, "rate"},
			{http.MethodPut, "/queues/q", `{"rate": "0/s"}`, "rate"},
			{http.MethodPut, "/queues/q", `{"rate": "5/d"}`, "rate"},
			{http.MethodPut, "/queues/q", `{"rate": "2000000/s"}`, "rate"},
			{http.MethodPut, "/queues/q", `{"key_rate": "x/s"}`, "key_rate"},
			{http.MethodPut, "/queues/q", `{"rate": "1/s", "burst": 0}`, "burst"},
			{http.MethodPut, "/queues/q", `{"burst": 3}`, "burst"},
			{http.MethodPut, "/queues/q", `{"key_burst": 3}`, "key_burst"},
			{http.MethodPut, "/queues/a%20b", `{"concurrency": 1}`, "name"},
			{http.MethodPost, "/jobs", wire.SubmitRequest{Command: "x", ConcurrencyKey: long}, "concurrency_key"},
			{http.MethodPost, "/jobs", wire.SubmitRequest{Command: "x", ConcurrencyKey: "a", GangSize: 2}, "concurrency_key"},
			{http.MethodPost, "/jobs/batch", wire.BatchSubmitRequest{Jobs: []wire.SubmitRequest{{Command: "x"}, {Command: "y", ConcurrencyKey: long}}}, "jobs[1].concurrency_key"},
			{http.MethodPost, "/schedules", wire.ScheduleRequest{Name: "s", Cron: "@daily", Job: wire.SubmitRequest{Command: "x", ConcurrencyKey: "a"}}, "job.concurrency_key"},
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

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
