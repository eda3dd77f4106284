package api

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
)

// TestPausesAPI covers the bounds on rate-limit pauses (issue #28): a
// keyless job's rate limit holds only that job unless the queue allows
// more, every pause lasts at most max_pause, and an admin lists and lifts
// pauses (GET /pauses, DELETE /queues/{name}/pauses, and resume).
func TestPausesAPI(t *testing.T) {
	setup := func(t *testing.T) *schedEnv { return newSchedEnv(t, schedT0, nil) }
	submit := func(e *schedEnv, queue, key string) wire.Job {
		t.Helper()
		var j wire.Job
		if code, werr := e.do(http.MethodPost, "/jobs", wire.SubmitRequest{Command: "x", Queue: queue, ConcurrencyKey: key}, &j); code != http.StatusCreated {
			t.Fatalf("submit: %d %+v", code, werr)
		}
		return j
	}
	claim := func(e *schedEnv, queue string, n int) []wire.Job {
		t.Helper()
		var res wire.ClaimResponse
		if code, werr := e.do(http.MethodPost, "/jobs/claim", wire.ClaimRequest{WorkerID: "w", Queues: []string{queue}, Max: n}, &res); code != http.StatusOK {
			t.Fatalf("claim: %d %+v", code, werr)
		}
		return res.Jobs
	}
	rateLimited := func(e *schedEnv, j wire.Job, d string) wire.Job {
		t.Helper()
		var out wire.Job
		if code, werr := e.do(http.MethodPost, "/jobs/"+j.ID+"/fail", wire.ReportRequest{Lease: j.Lease, Error: "429", RateLimitedFor: d}, &out); code != http.StatusOK {
			t.Fatalf("rate-limited report: %d %+v", code, werr)
		}
		return out
	}
	pauses := func(e *schedEnv) wire.PauseList {
		t.Helper()
		var l wire.PauseList
		if code, werr := e.do(http.MethodGet, "/pauses", nil, &l); code != http.StatusOK {
			t.Fatalf("GET /pauses: %d %+v", code, werr)
		}
		return l
	}

	t.Run("AKeylessRateLimitHoldsOnlyItsJobForAtMostMaxPause", func(t *testing.T) {
		e := setup(t)
		a, b := submit(e, "q", ""), submit(e, "q", "")
		j := rateLimited(e, claim(e, "q", 1)[0], "24h")
		if want := schedT0.Add(time.Duration(fsm.DefaultMaxPause)); !j.RunAt.Equal(want) || j.Attempts != 0 {
			t.Errorf("job %s runs at %v with %d attempts, want %v with 0", a.ID, j.RunAt, j.Attempts, want)
		}
		if l := pauses(e); l.Total != 0 {
			t.Errorf("pauses %+v, want none", l)
		}
		if got := claim(e, "q", 5); len(got) != 1 || got[0].ID != b.ID {
			t.Fatalf("claimed %+v, want the queue's other job %s", got, b.ID)
		}
	})

	t.Run("AnAdminListsAndLiftsAKeysPause", func(t *testing.T) {
		e := setup(t)
		submit(e, "q", "acme")
		submit(e, "q", "acme")
		rateLimited(e, claim(e, "q", 1)[0], "24h")
		l := pauses(e)
		want := schedT0.Add(time.Duration(fsm.DefaultMaxPause)).UTC()
		if l.Total != 1 || len(l.Pauses) != 1 || l.Pauses[0].Queue != "q" || l.Pauses[0].Key != "acme" || !l.Pauses[0].Until.Equal(want) {
			t.Fatalf("GET /pauses %+v, want acme's until %s (max_pause)", l, want)
		}
		if got := claim(e, "q", 5); len(got) != 0 {
			t.Fatalf("claimed %+v while acme is paused", got)
		}
		var lifted wire.PausesLifted
		if code, werr := e.do(http.MethodDelete, "/queues/q/pauses?key=acme", nil, &lifted); code != http.StatusOK || lifted.Lifted != 1 {
			t.Fatalf("DELETE /queues/q/pauses?key=acme: %d %+v %+v, want 1 lifted", code, werr, lifted)
		}
		if lifted.Queue.Limits != nil && len(lifted.Queue.Limits.Paused) != 0 {
			t.Errorf("queue after the lift %+v", lifted.Queue.Limits)
		}
		if got := claim(e, "q", 5); len(got) != 2 {
			t.Fatalf("claimed %d after the lift, want acme's 2", len(got))
		}
		if code, _ := e.do(http.MethodDelete, "/queues/q/pauses", nil, &lifted); code != http.StatusOK || lifted.Lifted != 0 {
			t.Errorf("lifting nothing: %d %+v", code, lifted)
		}
	})

	t.Run("PausesPageOnWithACursor", func(t *testing.T) {
		e := setup(t)
		for _, k := range []string{"c", "a", "b"} {
			submit(e, "q", k)
		}
		for _, j := range claim(e, "q", 3) {
			rateLimited(e, j, "1h")
		}
		var got []string
		cursor := ""
		for range 4 {
			var l wire.PauseList
			path := "/pauses?limit=2"
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			if code, werr := e.do(http.MethodGet, path, nil, &l); code != http.StatusOK {
				t.Fatalf("GET %s: %d %+v", path, code, werr)
			}
			if l.Total != 3 || len(l.Pauses) > 2 {
				t.Fatalf("GET %s: %+v, want at most 2 of 3", path, l)
			}
			for _, p := range l.Pauses {
				got = append(got, p.Key)
			}
			if cursor = l.NextCursor; cursor == "" {
				break
			}
		}
		if strings.Join(got, ",") != "a,b,c" {
			t.Errorf("paged through keys %v, want a,b,c once each", got)
		}
		for _, bad := range []string{"!!", "eA"} { // not base64; base64 of "x" with no separator
			if code, werr := e.do(http.MethodGet, "/pauses?cursor="+bad, nil, nil); code != http.StatusBadRequest || !strings.Contains(werr.Error, "cursor") {
				t.Errorf("GET /pauses?cursor=%s: %d %+v, want 400 naming the cursor", bad, code, werr)
			}
		}
	})

	t.Run("ResumeLiftsTheQueuesPause", func(t *testing.T) {
		e := setup(t)
		var q wire.Queue
		if code, werr := e.do(http.MethodPut, "/queues/q", wire.QueueLimits{RateLimitPausesQueue: true, MaxPause: "1h"}, &q); code != http.StatusOK {
			t.Fatalf("PUT: %d %+v", code, werr)
		}
		if q.Limits == nil || !q.Limits.RateLimitPausesQueue || q.Limits.MaxPause != "1h0m0s" {
			t.Fatalf("PUT reply %+v, want the settings shown", q.Limits)
		}
		submit(e, "q", "")
		submit(e, "q", "")
		rateLimited(e, claim(e, "q", 1)[0], "24h")
		if l := pauses(e); l.Total != 1 || l.Pauses[0].Key != "" || !l.Pauses[0].Until.Equal(schedT0.Add(time.Hour)) {
			t.Fatalf("GET /pauses %+v, want the queue's for 1h", l)
		}
		if code, werr := e.do(http.MethodPost, "/queues/q/resume", nil, &q); code != http.StatusOK {
			t.Fatalf("resume: %d %+v", code, werr)
		}
		if got := claim(e, "q", 5); len(got) != 2 {
			t.Fatalf("claimed %d after resume, want 2", len(got))
		}
	})

	t.Run("BadInputIs400NamingTheField", func(t *testing.T) {
		e := setup(t)
		before := e.digest()
		for _, c := range []struct{ method, path, body, field string }{
			{http.MethodPut, "/queues/q", `{"max_pause": "soon"}`, "max_pause"},
			{http.MethodPut, "/queues/q", `{"max_pause": "25h"}`, "max_pause"},
			{http.MethodPut, "/queues/q", `{"max_pause": "0s"}`, "max_pause"},
			{http.MethodDelete, "/queues/q/pauses?key=", "", "key"},
			{http.MethodDelete, "/queues/q/pauses?key=" + strings.Repeat("k", wire.MaxConcurrencyKeyBytes+1), "", "key"},
			{http.MethodGet, "/pauses?limit=0", "", "limit"},
		} {
			var body any
			if c.body != "" {
				body = c.body
			}
			code, werr := e.do(c.method, c.path, body, nil)
			if code != http.StatusBadRequest || !strings.Contains(werr.Error, c.field) {
				t.Errorf("%s %s %s: %d %+v, want 400 naming %s", c.method, c.path, c.body, code, werr, c.field)
			}
		}
		if e.digest() != before {
			t.Error("rejected requests changed the state")
		}
	})
}
