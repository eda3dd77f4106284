package api

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

// TestMetricsOfPauses: a pause a rate-limited attempt asked for is flow
// control too. While it lasts, the jobs it holds count under paused (the
// queue's) or key_paused, also in a queue without limits; the claim after
// it observes in workron_queue_limit_wait_seconds the time each job waited
// on it: here exactly the pause, on the state machine's clock.
func TestMetricsOfPauses(t *testing.T) {
	e := newSchedEnv(t, schedT0, nil)
	// scrape reads GET /metrics, one series a line.
	scrape := func() []string {
		t.Helper()
		rec := e.request(http.MethodGet, "/metrics", "", "")
		if rec.Code != http.StatusOK {
			t.Fatalf("GET /metrics: %d", rec.Code)
		}
		return strings.Split(rec.Body.String(), "\n")
	}
	has := func(lines []string, want string) {
		t.Helper()
		if !slices.Contains(lines, want) {
			t.Errorf("GET /metrics lacks %q", want)
		}
	}
	submit := func(queue, key string) {
		t.Helper()
		if code, werr := e.do(http.MethodPost, "/jobs", wire.SubmitRequest{Command: "x", Queue: queue, ConcurrencyKey: key}, nil); code != http.StatusCreated {
			t.Fatalf("submit: %d %+v", code, werr)
		}
	}
	claim := func(queue string, n int) []wire.Job {
		t.Helper()
		var res wire.ClaimResponse
		if code, werr := e.do(http.MethodPost, "/jobs/claim", wire.ClaimRequest{WorkerID: "w", Queues: []string{queue}, Max: n}, &res); code != http.StatusOK {
			t.Fatalf("claim: %d %+v", code, werr)
		}
		return res.Jobs
	}
	rateLimited := func(j wire.Job, d string) {
		t.Helper()
		if code, werr := e.do(http.MethodPost, "/jobs/"+j.ID+"/fail", wire.ReportRequest{Lease: j.Lease, Error: "429", RateLimitedFor: d}, nil); code != http.StatusOK {
			t.Fatalf("rate-limited report: %d %+v", code, werr)
		}
	}

	// mail, without limits: key acme paused 90s holding its 2 jobs. sms,
	// which lets it: a job without a key pauses the whole queue 1h,
	// holding both.
	submit("mail", "acme")
	submit("mail", "acme")
	submit("sms", "")
	submit("sms", "")
	rateLimited(claim("mail", 1)[0], "90s")
	j := claim("sms", 1)[0]
	if code, werr := e.do(http.MethodPut, "/queues/sms", wire.QueueLimits{RateLimitPausesQueue: true, MaxPause: "1h"}, nil); code != http.StatusOK {
		t.Fatalf("PUT /queues/sms: %d %+v", code, werr)
	}
	rateLimited(j, "1h")
	e.clock.Add(30 * time.Second)
	lines := scrape()
	for _, q := range []string{"mail", "sms"} {
		for _, l := range []string{"concurrency", "rate", "paused", "key_concurrency", "key_rate", "key_paused"} {
			n := 0
			if q+" "+l == "mail key_paused" || q+" "+l == "sms paused" {
				n = 2
			}
			has(lines, fmt.Sprintf("workron_queue_jobs_held{limit=%q,queue=%q} %d", l, q, n))
		}
	}
	if got := claim("mail", 5); len(got) != 0 {
		t.Fatalf("claimed %d jobs of a paused key", len(got))
	}

	e.clock.Add(time.Minute + time.Second) // past acme's pause
	if got := claim("mail", 5); len(got) != 2 {
		t.Fatalf("claimed %d jobs after the pause, want acme's 2", len(got))
	}
	lines = scrape()
	has(lines, `workron_queue_limit_wait_seconds_count{queue="mail"} 2`) // each of the 90s pause
	has(lines, `workron_queue_limit_wait_seconds_sum{queue="mail"} 180`)
	for _, l := range lines {
		if strings.HasPrefix(l, `workron_queue_limit_wait_seconds_count{queue="sms"}`) {
			t.Errorf("sms has a series before anything was claimed from it: %s", l)
		}
	}
}
