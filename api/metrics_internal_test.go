package api

import (
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// The series a labelCache hands out are the vector's own: what they count
// is what the vector (and so /metrics) reads, made once per label value.
func TestCachedSeriesCount(t *testing.T) {
	m := newMetrics(prometheus.NewRegistry(), nil)
	for range 3 {
		m.submitted.of("q").Inc()
		m.startLatency.of("q").Observe(0.5)
		m.observeRequest("POST /jobs", http.StatusCreated, time.Millisecond)
	}
	m.observeRequest("POST /jobs", http.StatusBadRequest, time.Millisecond)
	m.submitted.of("other").Inc()

	if n := testutil.ToFloat64(m.submitted.vec.WithLabelValues("q")); n != 3 {
		t.Errorf("workron_jobs_submitted_total{queue=q} = %v, want 3", n)
	}
	if n := testutil.ToFloat64(m.submitted.vec.WithLabelValues("other")); n != 1 {
		t.Errorf("workron_jobs_submitted_total{queue=other} = %v, want 1", n)
	}
	if n := testutil.ToFloat64(m.requests.WithLabelValues("POST /jobs", "201")); n != 3 {
		t.Errorf("workron_http_requests_total{route=POST /jobs,status=201} = %v, want 3", n)
	}
	if n := testutil.ToFloat64(m.requests.WithLabelValues("POST /jobs", "400")); n != 1 {
		t.Errorf("workron_http_requests_total{route=POST /jobs,status=400} = %v, want 1", n)
	}
	if n := histogramCount(t, m.latency.WithLabelValues("POST /jobs")); n != 4 {
		t.Errorf("workron_http_request_duration_seconds{route=POST /jobs} count = %d, want 4", n)
	}
	if n := histogramCount(t, m.startLatency.vec.WithLabelValues("q")); n != 3 {
		t.Errorf("workron_job_start_latency_seconds{queue=q} count = %d, want 3", n)
	}
	if len(m.submitted.series.m) != 2 || len(m.byRequest.m) != 2 {
		t.Errorf("cached %d queue and %d request series, want 2 and 2", len(m.submitted.series.m), len(m.byRequest.m))
	}
}

func histogramCount(t *testing.T, o prometheus.Observer) uint64 {
	t.Helper()
	var d dto.Metric
	if err := o.(prometheus.Metric).Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetHistogram().GetSampleCount()
}
