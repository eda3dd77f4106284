//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package api

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/workron/workron/api/wire"
)

// TestMetricsOfSteps: each step recorded counts once by kind and status,
// and its result's bytes are observed; a record refused (recorded before,
// a stale lease) counts nothing.
func TestMetricsOfSteps(t *testing.T) {
	e := newSchedEnv(t, time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), nil)
	if code, werr := e.do(http.MethodPost, "/jobs", `{"command":"true"}`, nil); code != http.StatusCreated {
		t.Fatalf("submit: %d %+v", code, werr)
	}
	var cr wire.ClaimResponse
	if code, werr := e.do(http.MethodPost, "/jobs/claim", `{"worker_id":"w1","shell":true}`, &cr); code != http.StatusOK || len(cr.Jobs) != 1 {
		t.Fatalf("claim: %d %+v", code, werr)
	}
	j := cr.Jobs[0]
	for _, r := range []struct {
		key, body string
		want      int
	}{
		{"charge", fmt.Sprintf(`{"lease":%d,"result":{"id":"ch_1"}}`, j.Lease), http.StatusCreated},
		{"send", fmt.Sprintf(`{"lease":%d,"status":"failed","result":"no such address"}`, j.Lease), http.StatusCreated},
		{"note", fmt.Sprintf(`{"lease":%d}`, j.Lease), http.StatusCreated},
		{"charge", fmt.Sprintf(`{"lease":%d,"result":"again"}`, j.Lease), http.StatusConflict},
		{"late", fmt.Sprintf(`{"lease":%d}`, j.Lease+1), http.StatusConflict},
	} {
		if code, werr := e.do(http.MethodPut, "/jobs/"+j.ID+"/steps/"+r.key, r.body, nil); code != r.want {
			t.Fatalf("PUT step %s: %d %+v, want %d", r.key, code, werr, r.want)
		}
	}
	m := e.srv.metrics.steps
	if n := testutil.CollectAndCount(m.recorded); n != 2 {
		t.Errorf("workron_steps_recorded_total has %d series, want 2", n)
	}
	for status, want := range map[string]float64{"ok": 2, "failed": 1} {
		if n := testutil.ToFloat64(m.recorded.WithLabelValues("run", status)); n != want {
			t.Errorf("workron_steps_recorded_total{kind=run,status=%s} = %v, want %v", status, n, want)
		}
	}
	var d dto.Metric
	if err := m.resultBytes.Write(&d); err != nil {
		t.Fatal(err)
	}
	if h, sum := d.GetHistogram(), len(`{"id":"ch_1"}`)+len(`"no such address"`); h.GetSampleCount() != 3 || h.GetSampleSum() != float64(sum) {
		t.Errorf("workron_step_result_bytes: %d results of %v bytes, want 3 of %d", h.GetSampleCount(), h.GetSampleSum(), sum)
	}
}

// TestMetricsOfParking: each attempt that parks counts by the kind of its
// step, and the parked jobs are a gauge by kind, read from the state; the
// claim of a job whose last attempt parked observes the wake-up lag, from
// the run time its wake gave it to the claim, exactly: a sleep from its
// wake time, a wait from the event that woke it, an invoke from its
// child's end. A first claim observes nothing, and a sleep already over
// is a step recorded, not a park.
func TestMetricsOfParking(t *testing.T) {
	e := newSchedEnv(t, time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), nil)
	m := e.srv.metrics.steps
	do := func(method, path, body string, want int, out any) {
		t.Helper()
		if code, werr := e.do(method, path, body, out); code != want {
			t.Fatalf("%s %s: %d %+v, want %d", method, path, code, werr, want)
		}
	}
	claim := func() wire.Job {
		t.Helper()
		var cr wire.ClaimResponse
		do(http.MethodPost, "/jobs/claim", `{"worker_id":"w1","shell":true}`, http.StatusOK, &cr)
		if len(cr.Jobs) != 1 {
			t.Fatalf("claimed %d jobs, want 1", len(cr.Jobs))
		}
		return cr.Jobs[0]
	}
	park := func(j wire.Job, key, what, body string, parked bool) {
		t.Helper()
		var rep wire.ParkReply
		do(http.MethodPost, "/jobs/"+j.ID+"/steps/"+key+"/"+what, fmt.Sprintf(`{"lease":%d,%s}`, j.Lease, body), http.StatusCreated, &rep)
		if rep.Parked != parked {
			t.Fatalf("%s %s: parked %v, want %v", what, key, rep.Parked, parked)
		}
	}
	lag := func(kind string) (uint64, float64) {
		t.Helper()
		var d dto.Metric
		if err := m.wakeLag.WithLabelValues(kind).(prometheus.Metric).Write(&d); err != nil {
			t.Fatal(err)
		}
		return d.GetHistogram().GetSampleCount(), d.GetHistogram().GetSampleSum()
	}
	gauge := func() string {
		t.Helper()
		mfs, err := e.srv.metrics.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() == "workron_jobs_parked" {
				for _, mt := range mf.GetMetric() {
					out[mt.GetLabel()[0].GetValue()] = mt.GetGauge().GetValue()
				}
			}
		}
		return fmt.Sprintf("sleep=%v wait=%v invoke=%v", out["sleep"], out["wait"], out["invoke"])
	}
	parkedTotal := func(kind string) float64 { return testutil.ToFloat64(m.parked.WithLabelValues(kind)) }

	do(http.MethodPost, "/jobs", `{"command":"true"}`, http.StatusCreated, nil)
	j := claim()
	if n := testutil.CollectAndCount(m.wakeLag); n != 0 {
		t.Fatalf("a first claim observed a wake-up lag (%d series)", n)
	}
	park(j, "nap", "sleep", `"duration_ms":10000`, true)
	if g := gauge(); g != "sleep=1 wait=0 invoke=0" || parkedTotal("sleep") != 1 {
		t.Fatalf("asleep: parked %s, %v parks of sleeps", g, parkedTotal("sleep"))
	}
	e.clock.Add(10*time.Second + 250*time.Millisecond)
	j = claim()
	if n, sum := lag("sleep"); n != 1 || sum != 0.25 {
		t.Fatalf("after the sleep: %d lags of %v s in all, want 1 of 0.25", n, sum)
	}
	if g := gauge(); g != "sleep=0 wait=0 invoke=0" {
		t.Fatalf("awake: parked %s", g)
	}

	park(j, "paid", "wait", `"event":"payment","key":"o-1","timeout_ms":3600000`, true)
	if g := gauge(); g != "sleep=0 wait=1 invoke=0" {
		t.Fatalf("waiting: parked %s", g)
	}
	e.clock.Add(5 * time.Second)
	var ev wire.EventReply
	do(http.MethodPost, "/events", `{"name":"payment","key":"o-1","payload":{}}`, http.StatusAccepted, &ev)
	if ev.Woke != 1 {
		t.Fatalf("the event woke %d jobs, want 1", ev.Woke)
	}
	e.clock.Add(40 * time.Millisecond)
	j = claim()
	if n, sum := lag("wait"); n != 1 || sum != 0.04 {
		t.Fatalf("after the event: %d lags of %v s in all, want 1 of 0.04", n, sum)
	}

	park(j, "child", "invoke", `"job":{"command":"true"}`, true)
	if g := gauge(); g != "sleep=0 wait=0 invoke=1" || parkedTotal("invoke") != 1 {
		t.Fatalf("invoking: parked %s, %v parks of invokes", g, parkedTotal("invoke"))
	}
	child := claim()
	do(http.MethodPost, "/jobs/"+child.ID+"/done", fmt.Sprintf(`{"lease":%d}`, child.Lease), http.StatusOK, nil)
	e.clock.Add(10 * time.Millisecond)
	j = claim()
	if n, sum := lag("invoke"); n != 1 || sum != 0.01 {
		t.Fatalf("after the child: %d lags of %v s in all, want 1 of 0.01", n, sum)
	}

	park(j, "past", "sleep", fmt.Sprintf(`"until":%q`, e.clock.Now().Add(-time.Second).Format(time.RFC3339Nano)), false)
	if got := testutil.ToFloat64(m.recorded.WithLabelValues("sleep", "ok")); got != 1 || parkedTotal("sleep") != 1 {
		t.Fatalf("a sleep already over: %v recorded, %v parks of sleeps; want 1 and still 1", got, parkedTotal("sleep"))
	}
	if g := gauge(); g != "sleep=0 wait=0 invoke=0" {
		t.Fatalf("at the end: parked %s", g)
	}
}
