//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package api

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
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

// TestMetricsOfWakeUps: the claim of a job whose last attempt parked
// observes the wake-up lag by the kind of step it parked on, from the run
// time its wake gave it to the claim, exactly: a sleep from its wake time,
// a wait from the event that woke it. A claim of a job that did not park
// observes nothing.
func TestMetricsOfWakeUps(t *testing.T) {
	e := newSchedEnv(t, time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), nil)
	if code, werr := e.do(http.MethodPost, "/jobs", `{"command":"true"}`, nil); code != http.StatusCreated {
		t.Fatalf("submit: %d %+v", code, werr)
	}
	claim := func() wire.Job {
		t.Helper()
		var cr wire.ClaimResponse
		if code, werr := e.do(http.MethodPost, "/jobs/claim", `{"worker_id":"w1","shell":true}`, &cr); code != http.StatusOK || len(cr.Jobs) != 1 {
			t.Fatalf("claim: %d %+v %d jobs", code, werr, len(cr.Jobs))
		}
		return cr.Jobs[0]
	}
	propose := func(cmd fsm.Cmd) fsm.Result {
		t.Helper()
		res, err := e.srv.propose(context.Background(), cmd)
		if err != nil {
			t.Fatalf("%s: %v", cmd.Op, err)
		}
		return res
	}
	lag := func(kind string) (uint64, float64) {
		t.Helper()
		var d dto.Metric
		if err := e.srv.metrics.steps.wakeLag.WithLabelValues(kind).(prometheus.Metric).Write(&d); err != nil {
			t.Fatal(err)
		}
		return d.GetHistogram().GetSampleCount(), d.GetHistogram().GetSampleSum()
	}

	j := claim()
	if n := testutil.CollectAndCount(e.srv.metrics.steps.wakeLag); n != 0 {
		t.Fatalf("a first claim observed a wake-up lag (%d series)", n)
	}
	if res := propose(fsm.Cmd{Op: fsm.OpSleepStep, SleepStep: &fsm.SleepStep{JobID: j.ID, Lease: j.Lease, Key: "nap", For: int64(10 * time.Second)}}); !res.Parked {
		t.Fatalf("sleep did not park: %+v", res)
	}
	e.clock.Add(10*time.Second + 250*time.Millisecond)
	j = claim()
	if n, sum := lag("sleep"); n != 1 || sum != 0.25 {
		t.Fatalf("after the sleep: %d lags of %v s in all, want 1 of 0.25", n, sum)
	}

	if res := propose(fsm.Cmd{Op: fsm.OpWaitStep, WaitStep: &fsm.WaitStep{JobID: j.ID, Lease: j.Lease, Key: "paid", Event: "payment", EventKey: "o-1", Timeout: int64(time.Hour)}}); !res.Parked {
		t.Fatalf("wait did not park: %+v", res)
	}
	e.clock.Add(5 * time.Second)
	if res := propose(fsm.Cmd{Op: fsm.OpSendEvent, SendEvent: &fsm.SendEvent{Name: "payment", Key: "o-1", Payload: []byte(`{}`)}}); res.Woke != 1 {
		t.Fatalf("the event woke %d jobs, want 1", res.Woke)
	}
	e.clock.Add(40 * time.Millisecond)
	claim()
	if n, sum := lag("wait"); n != 1 || sum != 0.04 {
		t.Fatalf("after the event: %d lags of %v s in all, want 1 of 0.04", n, sum)
	}
	if n, _ := lag("sleep"); n != 1 {
		t.Fatalf("the wait's claim counted as a sleep's")
	}
}
