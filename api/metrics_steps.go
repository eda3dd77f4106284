package api

import (
	"errors"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// Metrics of durable steps (issue #31), counted like the job transitions
// (events.go): by the leader that proposed the record, for the requests it
// served.

// stepKindRun is the kind label of a step a handler ran and recorded with
// PUT /jobs/{id}/steps/{key} (a stored step of no kind).
const stepKindRun = "run"

// stepKind is st's kind label.
func stepKind(st *store.Step) string {
	if st.Kind == "" {
		return stepKindRun
	}
	return st.Kind
}

// stepKey is a steps-recorded series: a step kind and status.
type stepKey struct{ kind, status string }

// stepMetrics are the series of durable steps.
type stepMetrics struct {
	recorded    *prometheus.CounterVec
	byKind      *labelCache[stepKey, prometheus.Counter]
	resultBytes prometheus.Histogram
	// parked counts the attempts that parked their job, by step kind.
	parked   *prometheus.CounterVec
	parkedOf *labelCache[string, prometheus.Counter]
	// wakeLag is observed per claim of a job whose last attempt parked:
	// from when it could run again (its run time: a sleep's wake time, a
	// wait's deadline, the event or the child's end that woke it) to the
	// claim.
	wakeLag *prometheus.HistogramVec
	lagOf   *labelCache[string, prometheus.Observer]
}

// wakeBuckets are the buckets of the wake-up lag, in seconds: finer than
// waitBuckets under a second, where an event's wake-up should be.
var wakeBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

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
	m.parked = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "workron_jobs_parked_total",
		Help: "Attempts that parked their job on a durable sleep, wait or invoke step (by this node as leader), by the kind of the step.",
	}, []string{"kind"})
	m.wakeLag = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "workron_job_wake_lag_seconds",
		Help: "Per claim of a job woken from a durable sleep, wait or invoke, by the kind of step it parked on: " +
			"from when it could run again (the sleep's wake time, the wait's deadline, the event or the child's end that woke it) to the claim.",
		Buckets: wakeBuckets,
	}, []string{"kind"})
	m.byKind = newLabelCache(func(k stepKey) prometheus.Counter { return m.recorded.WithLabelValues(k.kind, k.status) })
	m.parkedOf = newLabelCache(func(kind string) prometheus.Counter { return m.parked.WithLabelValues(kind) })
	m.lagOf = newLabelCache(func(kind string) prometheus.Observer { return m.wakeLag.WithLabelValues(kind) })
	return m
}

func (m *stepMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.recorded, m.resultBytes, m.parked, m.wakeLag}
}

// parking counts what a parking route (sleep, wait, invoke) did: the
// attempt parked the job on step st, or st, complete at once, was
// recorded.
func (m *stepMetrics) parking(st *store.Step, parked bool) {
	if parked {
		m.parkedOf.get(stepKind(st)).Inc()
		return
	}
	m.stepRecorded(st)
}

// claimed observes the wake-up lag of claimed job j if its last attempt
// parked: the job was pending from its run time, which the wake set (a
// sleep's wake time, a wait's deadline, or the entry of the event or the
// child's end that woke it), to this claim.
func (m *stepMetrics) claimed(j *store.Job) {
	kind := parkedOn(j)
	if kind == "" || j.StartedAt < j.RunAt {
		return
	}
	m.lagOf.get(kind).Observe(time.Duration(j.StartedAt - j.RunAt).Seconds())
}

// parkedOn is the kind of step (sleep, wait, invoke) job j's last attempt
// parked on, "" when it did not park. The state machine ends a parking
// attempt with status parked and the error "parked on KIND step KEY".
func parkedOn(j *store.Job) string {
	n := len(j.History)
	if n == 0 || j.History[n-1].Status != store.StatusParked {
		return ""
	}
	rest, _ := strings.CutPrefix(j.History[n-1].Error, "parked on ")
	switch kind, _, _ := strings.Cut(rest, " "); kind {
	case store.StepSleep, store.StepWait, store.StepInvoke:
		return kind
	}
	return "other"
}

// stepRecorded counts a step recorded.
func (m *stepMetrics) stepRecorded(st *store.Step) {
	m.byKind.get(stepKey{stepKind(st), st.Status}).Inc()
	m.resultBytes.Observe(float64(st.Size))
}

// parkedKinds are the values of descParked's kind label.
var parkedKinds = []string{store.StepSleep, store.StepWait, store.StepInvoke}

var descParked = prometheus.NewDesc("workron_jobs_parked",
	"Jobs parked on a durable step, by its kind (sleep, wait, invoke) (this node's state: totals the store keeps with the parks, three keys read at scrape time).",
	[]string{"kind"}, nil)

// parkCounter is what the state's read transaction (a *store.Tx, given
// to ViewJobs as a JobReader) offers to count the parked jobs.
type parkCounter interface {
	ParkCounts() map[string]int
}

// parkCollector reads the parked jobs by kind at scrape time from the
// node's own state.
type parkCollector struct{ s *Server }

func (c *parkCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descParked }

func (c *parkCollector) Collect(ch chan<- prometheus.Metric) {
	var counts map[string]int
	err := c.s.state.ViewJobs(func(r fsm.JobReader) error {
		pc, ok := r.(parkCounter)
		if !ok {
			return errNoParkCount
		}
		counts = pc.ParkCounts()
		return nil
	})
	if err != nil {
		c.s.logger.Warn("count parked jobs", "err", err)
		return
	}
	for _, k := range parkedKinds {
		ch <- prometheus.MustNewConstMetric(descParked, prometheus.GaugeValue, float64(counts[k]), k)
	}
}

var errNoParkCount = errors.New("api: the state's reader does not count parks")
