//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package api

import (
	"fmt"
	"net/http"
	"testing"
	"time"

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
