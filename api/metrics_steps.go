package api

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/workron/workron/store"
)

// Metrics of durable steps (issue #31), counted like the job transitions
// (events.go): by the leader that proposed the record, for the requests it
// served.

// stepKindRun is the kind label of a step a handler ran and recorded with
// PUT /jobs/{id}/steps/{key}.
const stepKindRun = "run"

// stepKey is a steps-recorded series: a step kind and status.
type stepKey struct{ kind, status string }

// stepMetrics are the series of durable steps.
type stepMetrics struct {
	recorded    *prometheus.CounterVec
	byKind      *labelCache[stepKey, prometheus.Counter]
	resultBytes prometheus.Histogram
}

func newStepMetrics() *stepMetrics {
	m := &stepMetrics{
		recorded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workron_steps_recorded_total",
			Help: "Durable steps recorded in a job's journal by this node as leader, by kind and status.",
		}, []string{"kind", "status"}),
		resultBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "workron_step_result_bytes",
			Help:    "Bytes of the result of each durable step recorded by this node as leader.",
			Buckets: prometheus.ExponentialBuckets(64, 4, 7), // 64 B to 256 KiB, the largest result
		}),
	}
	m.byKind = newLabelCache(func(k stepKey) prometheus.Counter { return m.recorded.WithLabelValues(k.kind, k.status) })
	return m
}

func (m *stepMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.recorded, m.resultBytes}
}

// stepRecorded counts a step of kind recorded.
func (m *stepMetrics) stepRecorded(kind string, st *store.Step) {
	m.byKind.get(stepKey{kind, st.Status}).Inc()
	m.resultBytes.Observe(float64(st.Size))
}
