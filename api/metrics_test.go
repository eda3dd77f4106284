package api_test

import (
	"fmt"
	"maps"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/node"
	"github.com/workron/workron/raftnode"
)

// TestMetricsAfterAKnownWorkload runs a workload whose every transition is
// known on a one-node cluster and compares the series: counters and queue
// gauges exactly, histograms by their counts, Raft figures by what must hold.
func TestMetricsAfterAKnownWorkload(t *testing.T) {
	reg, c := metricsNode(t, time.Second)
	hc := httpClient(t)
	base := c.URL(0)
	one, never := 1, false

	submit := func(req wire.SubmitRequest) string {
		return decodeJSON[wire.Job](t, doHTTP(t, hc, http.StatusCreated, "POST", base+"/jobs", req)).ID
	}
	claim := func(worker, queue string, max int) []wire.Job {
		req := wire.ClaimRequest{WorkerID: worker, Queues: []string{queue}, Shell: true, Max: max}
		return decodeJSON[wire.ClaimResponse](t, doHTTP(t, hc, http.StatusOK, "POST", base+"/jobs/claim", req)).Jobs
	}
	report := func(j wire.Job, verb string, req wire.ReportRequest) {
		req.Lease = j.Lease
		doHTTP(t, hc, http.StatusOK, "POST", base+"/jobs/"+j.ID+"/"+verb, req)
	}

	// q1: three jobs claimed at once; one done, one failed with attempts
	// left (retried), one failed for good and then retried by hand.
	for range 3 {
		submit(wire.SubmitRequest{Command: "true", Queue: "q1"})
	}
	q1 := claim("w1", "q1", 3)
	if len(q1) != 3 {
		t.Fatalf("claimed %d jobs of q1, want 3", len(q1))
	}
	report(q1[0], "done", wire.ReportRequest{})
	report(q1[1], "fail", wire.ReportRequest{Error: "flaky"})
	report(q1[2], "fail", wire.ReportRequest{Error: "broken", Retry: &never})
	doHTTP(t, hc, http.StatusOK, "POST", base+"/jobs/"+q1[2].ID+"/retry", nil)

	// q2: one job whose lease expires with no attempt left, one cancelled.
	expiring := submit(wire.SubmitRequest{Command: "sleep 1000", Queue: "q2", MaxAttempts: &one})
	cancelled := submit(wire.SubmitRequest{Command: "true", Queue: "q2"})
	got := claim("w2", "q2", 1)
	if len(got) != 1 || got[0].ID != expiring {
		t.Fatalf("claimed %v from q2, want %s", got, expiring)
	}
	// One heartbeat acknowledges the attempt, so that its expiry counts.
	doHTTP(t, hc, http.StatusOK, "POST", base+"/jobs/"+expiring+"/heartbeat", wire.HeartbeatRequest{Lease: got[0].Lease})
	doHTTP(t, hc, http.StatusOK, "POST", base+"/jobs/"+cancelled+"/cancel", nil)
	// q3: one job delayed by an hour.
	submit(wire.SubmitRequest{Command: "true", Queue: "q3", Delay: "1h"})

	clustertest.WaitFor(t, 15*time.Second, func() error {
		j := decodeJSON[wire.Job](t, doHTTP(t, hc, http.StatusOK, "GET", base+"/jobs/"+expiring, nil))
		if j.Status != wire.StatusFailed {
			return fmt.Errorf("job %s is %s, waiting for its lease to expire", j.ID, j.Status)
		}
		return nil
	})

	t.Run("JobCountersByQueue", func(t *testing.T) {
		want := `
# HELP workron_jobs_submitted_total Jobs accepted by this node while leader.
# TYPE workron_jobs_submitted_total counter
workron_jobs_submitted_total{queue="q1"} 3
workron_jobs_submitted_total{queue="q2"} 2
workron_jobs_submitted_total{queue="q3"} 1
# HELP workron_jobs_claimed_total Jobs leased to workers.
# TYPE workron_jobs_claimed_total counter
workron_jobs_claimed_total{queue="q1"} 3
workron_jobs_claimed_total{queue="q2"} 1
# HELP workron_jobs_completed_total Attempts reported done.
# TYPE workron_jobs_completed_total counter
workron_jobs_completed_total{queue="q1"} 1
# HELP workron_jobs_failed_total Jobs that failed for good.
# TYPE workron_jobs_failed_total counter
workron_jobs_failed_total{queue="q1"} 1
workron_jobs_failed_total{queue="q2"} 1
# HELP workron_jobs_retried_total Jobs sent back to pending for another attempt: after a failed or expired attempt, or by POST /jobs/{id}/retry.
# TYPE workron_jobs_retried_total counter
workron_jobs_retried_total{queue="q1"} 2
# HELP workron_leases_expired_total Attempts whose lease ran out.
# TYPE workron_leases_expired_total counter
workron_leases_expired_total{queue="q2"} 1
# HELP workron_jobs_cancelled_total Jobs cancelled through the API (a running job counts when it is told to stop).
# TYPE workron_jobs_cancelled_total counter
workron_jobs_cancelled_total{queue="q2"} 1
`
		// The reaper counts an expiry after its entry applies, which the
		// job's status above already shows: wait for the counters too
		// (they only grow, so one past its mark still fails).
		clustertest.WaitFor(t, 5*time.Second, func() error {
			return testutil.GatherAndCompare(reg, strings.NewReader(want),
				"workron_jobs_submitted_total", "workron_jobs_claimed_total", "workron_jobs_completed_total",
				"workron_jobs_failed_total", "workron_jobs_retried_total", "workron_leases_expired_total",
				"workron_jobs_cancelled_total")
		})
	})

	t.Run("QueueDepthsByStatus", func(t *testing.T) {
		want := `
# HELP workron_queue_jobs Jobs by queue and status (this node's state).
# TYPE workron_queue_jobs gauge
workron_queue_jobs{queue="q1",status="done"} 1
workron_queue_jobs{queue="q1",status="pending"} 2
workron_queue_jobs{queue="q2",status="cancelled"} 1
workron_queue_jobs{queue="q2",status="failed"} 1
workron_queue_jobs{queue="q3",status="pending"} 1
# HELP workron_queue_paused 1 if the queue is paused.
# TYPE workron_queue_paused gauge
workron_queue_paused{queue="q1"} 0
workron_queue_paused{queue="q2"} 0
workron_queue_paused{queue="q3"} 0
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "workron_queue_jobs", "workron_queue_paused"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("OldestPendingAgeOnlyForQueuesWithDueJobs", func(t *testing.T) {
		age := gauges(t, reg, "workron_queue_oldest_pending_age_seconds", "queue")
		// q1 holds the job retried by hand, due since then; q3's job is
		// not due for an hour; q2 has nothing pending.
		if age["q1"] <= 0 || age["q2"] != 0 || age["q3"] != 0 || len(age) != 3 {
			t.Fatalf("oldest pending age by queue = %v, want q1 > 0 and q2, q3 at 0", age)
		}
	})

	t.Run("StartLatencyAndRunDurationPerAttempt", func(t *testing.T) {
		start := histogramCounts(t, reg, "workron_job_start_latency_seconds", "queue")
		run := histogramCounts(t, reg, "workron_job_run_duration_seconds", "queue")
		// Every claim has a start latency; every report a run duration (the
		// expired attempt has none).
		if start["q1"] != 3 || start["q2"] != 1 || len(start) != 2 {
			t.Errorf("start latency observations by queue = %v, want q1:3 q2:1", start)
		}
		if run["q1"] != 3 || len(run) != 1 {
			t.Errorf("run duration observations by queue = %v, want q1:3", run)
		}
	})

	t.Run("RaftFigures", func(t *testing.T) {
		c.Snapshot(t, 0)
		g := func(name string) float64 { return gauges(t, reg, name, "")[""] }
		if g("workron_raft_leader") != 1 || gauges(t, reg, "workron_raft_role", "role")["leader"] != 1 || gauges(t, reg, "workron_raft_role", "role")["follower"] != 0 {
			t.Error("the only node is not shown as leader")
		}
		applied := g("workron_raft_applied_index")
		if g("workron_raft_term") < 1 || applied < 10 || g("workron_raft_commit_index") < applied || g("workron_raft_last_log_index") < applied {
			t.Errorf("term %v, applied %v, commit %v, last log %v", g("workron_raft_term"), applied, g("workron_raft_commit_index"), g("workron_raft_last_log_index"))
		}
		if a := gauges(t, reg, "workron_cluster_clock_ahead_seconds", ""); len(a) != 1 || a[""] > 1 {
			t.Errorf("cluster clock ahead: %v, want one series near 0 on a one-node cluster", a)
		}
		if g("workron_raft_last_contact_seconds") != 0 {
			t.Errorf("last contact on the leader = %v, want 0", g("workron_raft_last_contact_seconds"))
		}
		entries, commands := g("workron_raft_entries_proposed_total"), g("workron_raft_commands_proposed_total")
		per := histograms(t, reg, "workron_raft_commands_per_entry")[""]
		if entries < 10 || commands < entries || float64(per.count) != entries || per.sum != commands {
			t.Errorf("entries %v, commands %v, commands per entry: %d observations summing to %v", entries, commands, per.count, per.sum)
		}
		if apply := histograms(t, reg, "workron_raft_apply_duration_seconds")[""]; apply.count == 0 || apply.sum <= 0 {
			t.Errorf("apply latency: %d observations summing to %v", apply.count, apply.sum)
		}
		stages := histograms(t, reg, "workron_raft_stage_seconds", "stage")
		for _, name := range raftnode.StageNames() {
			if h := stages[name]; h.count == 0 || (name != "queue" && float64(h.count) > entries) {
				t.Errorf("stage %s: %d observations for %v entries", name, h.count, entries)
			}
		}
		if w := stages["leader_write"]; w.sum <= 0 {
			t.Errorf("leader_write stage sums to %v, want above 0", w.sum)
		}
		if w := histograms(t, reg, "workron_raft_log_write_seconds")[""]; w.count < stages["leader_write"].count || w.sum <= 0 {
			t.Errorf("log writes: %d summing to %v, want at least one per entry", w.count, w.sum)
		}
		if rpc := histograms(t, reg, "workron_raft_append_rpc_seconds")[""]; rpc.count != 0 {
			t.Errorf("%d AppendEntries round trips on a cluster of one", rpc.count)
		}
		if g("workron_raft_snapshots_total") != 1 || g("workron_raft_snapshot_bytes") <= 0 || g("workron_raft_snapshot_index") < applied ||
			g("workron_raft_snapshot_duration_seconds") <= 0 || g("workron_raft_snapshot_timestamp_seconds") < float64(time.Now().Add(-time.Minute).Unix()) {
			t.Errorf("snapshots %v, bytes %v, index %v (applied %v), duration %v, at %v", g("workron_raft_snapshots_total"), g("workron_raft_snapshot_bytes"),
				g("workron_raft_snapshot_index"), applied, g("workron_raft_snapshot_duration_seconds"), g("workron_raft_snapshot_timestamp_seconds"))
		}
	})

	t.Run("HTTPRequestsByRouteAndStatus", func(t *testing.T) {
		n := counters(t, reg, "workron_http_requests_total", "route", "status")
		for key, want := range map[string]float64{
			"POST /jobs 201": 6, "POST /jobs/claim 200": 2, "POST /jobs/{id}/done 200": 1,
			"POST /jobs/{id}/fail 200": 2, "POST /jobs/{id}/retry 200": 1, "POST /jobs/{id}/cancel 200": 1,
		} {
			if n[key] != want {
				t.Errorf("requests %q = %v, want %v (all: %v)", key, n[key], want, n)
			}
		}
	})

	t.Run("ServedAsPrometheusText", func(t *testing.T) {
		r := doHTTP(t, hc, http.StatusOK, "GET", base+"/metrics", nil)
		for _, want := range []string{
			`workron_jobs_submitted_total{queue="q1"} 3`,
			`workron_job_run_duration_seconds_bucket{queue="q1",le="+Inf"} 3`,
			`workron_raft_apply_duration_seconds_count `,
			`workron_raft_role{role="leader"} 1`,
			`go_goroutines `,
		} {
			if !strings.Contains(string(r.Body), want) {
				t.Errorf("GET /metrics lacks %q", want)
			}
		}
	})
}

// metricsNode starts a one-node cluster with leases of ttl whose series go
// to the registry it returns.
func metricsNode(t *testing.T, ttl time.Duration) (*prometheus.Registry, *clustertest.Cluster) {
	t.Helper()
	reg := prometheus.NewRegistry()
	c := clustertest.New(t, 1, clustertest.WithLeaseTTL(ttl),
		clustertest.WithConfig(func(i int, nc *node.Config) { nc.API.Registry = reg }))
	return reg, c
}

// gauges reads a gauge or counter family by the value of one label ("" for
// a family without labels).
func gauges(t *testing.T, reg *prometheus.Registry, name, label string) map[string]float64 {
	t.Helper()
	return counters(t, reg, name, label)
}

// counters reads a family's values keyed by its label values, space-separated.
func counters(t *testing.T, reg *prometheus.Registry, name string, labels ...string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]float64)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var key []string
			for _, l := range labels {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == l {
						key = append(key, lp.GetValue())
					}
				}
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			out[strings.Join(key, " ")] = v
		}
	}
	return out
}

type histogramFigures struct {
	count uint64
	sum   float64
}

// histograms reads a histogram family by the value of its one label ("" for
// a family without labels).
func histograms(t *testing.T, reg *prometheus.Registry, name string, label ...string) map[string]histogramFigures {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]histogramFigures)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := ""
			for _, lp := range m.GetLabel() {
				if len(label) > 0 && lp.GetName() == label[0] {
					key = lp.GetValue()
				}
			}
			h := m.GetHistogram()
			out[key] = histogramFigures{count: h.GetSampleCount(), sum: h.GetSampleSum()}
		}
	}
	return out
}

func histogramCounts(t *testing.T, reg *prometheus.Registry, name, label string) map[string]uint64 {
	t.Helper()
	out := make(map[string]uint64)
	for k, h := range histograms(t, reg, name, label) {
		out[k] = h.count
	}
	return out
}

// TestMetricsOfFlowControl: per queue with limits, the due jobs each kind
// of limit holds back (a gauge by limit), and for each job claimed from it
// how long the limits held it back (a histogram). The histogram's sum is
// exact: the one job held so far waited from the claim that filled its
// queue to the report of one of those attempts, the times the attempt's
// history shows.
func TestMetricsOfFlowControl(t *testing.T) {
	reg, c := metricsNode(t, time.Hour)
	hc := httpClient(t)
	base := c.URL(0)
	submit := func(queue, key string) string {
		req := wire.SubmitRequest{Command: "true", Queue: queue, ConcurrencyKey: key}
		return decodeJSON[wire.Job](t, doHTTP(t, hc, http.StatusCreated, "POST", base+"/jobs", req)).ID
	}
	claim := func(queue string) []wire.Job {
		req := wire.ClaimRequest{WorkerID: "w1", Queues: []string{queue}, Shell: true, Max: 10}
		return decodeJSON[wire.ClaimResponse](t, doHTTP(t, hc, http.StatusOK, "POST", base+"/jobs/claim", req)).Jobs
	}
	ids := func(jobs []wire.Job) string {
		var out []string
		for _, j := range jobs {
			out = append(out, j.ID)
		}
		return strings.Join(out, ",")
	}

	two, one := 2, 1
	doHTTP(t, hc, http.StatusOK, "PUT", base+"/queues/tenants", wire.QueueLimits{Concurrency: &two, KeyConcurrency: &one})
	a, b, c2 := submit("tenants", "acme"), submit("tenants", "acme"), submit("tenants", "globex")
	d := submit("tenants", "initech")
	submit("plain", "acme")
	if got := ids(claim("tenants")); got != a+","+c2 {
		t.Fatalf("claimed %s, want %s,%s: b waits for acme, d for the queue", got, a, c2)
	}
	claim("plain")

	t.Run("HeldJobsByLimit", func(t *testing.T) {
		// b waits for its key too, but counts once: under the queue's
		// limit, the first that holds it.
		want := map[string]float64{"tenants concurrency": 2, "tenants key_concurrency": 0, "tenants rate": 0, "tenants key_rate": 0,
			"tenants paused": 0, "tenants key_paused": 0}
		if got := counters(t, reg, "workron_queue_jobs_held", "queue", "limit"); !maps.Equal(got, want) {
			t.Errorf("held %v, want %v", got, want)
		}
	})

	t.Run("TimeHeldPerClaimedJob", func(t *testing.T) {
		aJob := decodeJSON[wire.Job](t, doHTTP(t, hc, http.StatusOK, "GET", base+"/jobs/"+a, nil))
		doHTTP(t, hc, http.StatusOK, "POST", base+"/jobs/"+a+"/done", wire.ReportRequest{Lease: aJob.Lease})
		// Claims take the keys in turns: initech's after globex's.
		if got := ids(claim("tenants")); got != d {
			t.Fatalf("claimed %s after a's report, want %s (initech's turn; %s waits for the queue)", got, d, b)
		}
		aJob = decodeJSON[wire.Job](t, doHTTP(t, hc, http.StatusOK, "GET", base+"/jobs/"+a, nil))
		att := aJob.AttemptHistory[0]
		held := att.Ended.Sub(att.Started).Seconds()
		h := histograms(t, reg, "workron_queue_limit_wait_seconds", "queue")
		if got := h["tenants"]; got.count != 3 || math.Abs(got.sum-held) > 1e-9 {
			t.Errorf("tenants: %d observations summing %vs, want 3 (a, c and d) summing %vs (d, while a ran)", got.count, got.sum, held)
		}
		if _, ok := h["plain"]; ok {
			t.Errorf("a queue without limits has a series: %v", h)
		}
	})
}
