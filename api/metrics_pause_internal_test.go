package api

import (
	"maps"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/workron/workron/api/wire"
)

// TestMetricsOfPauses: a pause a rate-limited attempt asked for is flow
// control too. While it lasts, the jobs it holds count under paused (the
// queue's) or key_paused, also in a queue without limits; the claim after
// it observes in workron_queue_limit_wait_seconds the time each job waited
// on it: here exactly the pause, on the state machine's clock.
func TestMetricsOfPauses(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newSchedEnv(t, schedT0, func(c *Config) { c.Registry = reg })
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

	// mail, without limits: key acme paused 90s holding its 2 jobs. sms:
	// a job without a key pauses the whole queue 1h, holding both.
	submit("mail", "acme")
	submit("mail", "acme")
	submit("sms", "")
	submit("sms", "")
	rateLimited(claim("mail", 1)[0], "90s")
	rateLimited(claim("sms", 1)[0], "1h")
	e.clock.Add(30 * time.Second)
	want := map[string]float64{}
	for _, q := range []string{"mail", "sms"} {
		for _, l := range heldLimits {
			want[q+" "+l] = 0
		}
	}
	want["mail key_paused"], want["sms paused"] = 2, 2
	if got := heldGauges(t, reg); !maps.Equal(got, want) {
		t.Errorf("held %v, want %v", got, want)
	}
	if got := claim("mail", 5); len(got) != 0 {
		t.Fatalf("claimed %d jobs of a paused key", len(got))
	}

	e.clock.Add(time.Minute + time.Second) // past acme's pause
	if got := claim("mail", 5); len(got) != 2 {
		t.Fatalf("claimed %d jobs after the pause, want acme's 2", len(got))
	}
	n, sum := limitWaits(t, reg, "mail")
	if n != 2 || math.Abs(sum-2*90) > 1e-9 {
		t.Errorf("mail: %d observations summing %vs, want 2 of 90s (the pause)", n, sum)
	}
	if n, _ := limitWaits(t, reg, "sms"); n != 0 {
		t.Errorf("sms: %d observations before anything was claimed from it", n)
	}
}

// heldGauges reads workron_queue_jobs_held by "queue limit".
func heldGauges(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]float64)
	for _, mf := range mfs {
		if mf.GetName() != "workron_queue_jobs_held" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var q, l string
			for _, lp := range m.GetLabel() {
				switch lp.GetName() {
				case "queue":
					q = lp.GetValue()
				case "limit":
					l = lp.GetValue()
				}
			}
			out[q+" "+l] = m.GetGauge().GetValue()
		}
	}
	return out
}

// limitWaits reads workron_queue_limit_wait_seconds of a queue: its count
// and sum.
func limitWaits(t *testing.T, reg *prometheus.Registry, queue string) (uint64, float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "workron_queue_limit_wait_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "queue" && lp.GetValue() == queue {
					return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	return 0, 0
}
