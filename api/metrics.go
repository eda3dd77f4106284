package api

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/workron/workron/store"
)

// metrics are the node's Prometheus series. Queue depths and Raft figures
// are read at scrape time from in-memory counters, never by scanning jobs.
//
// The series observed per request or per job are looked up through
// labelCaches (of, observeRequest), not the vectors' WithLabelValues, which
// hashes the labels and allocates on every call.
type metrics struct {
	reg       *prometheus.Registry
	submitted *byQueue[prometheus.Counter]
	completed *byQueue[prometheus.Counter]
	failed    *byQueue[prometheus.Counter]
	retried   *byQueue[prometheus.Counter]
	expired   *byQueue[prometheus.Counter]
	claimed   *byQueue[prometheus.Counter]
	cancelled *byQueue[prometheus.Counter]
	handedOff *byQueue[prometheus.Counter]
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	// byRequest caches the requests and latency series of a route and
	// status (observeRequest).
	byRequest *labelCache[requestKey, requestSeries]
	// startLatency and runDuration are observed per attempt: from when it
	// could start to its claim, and from its claim to its report.
	startLatency *byQueue[prometheus.Observer]
	runDuration  *byQueue[prometheus.Observer]
	// limitWait is observed per attempt claimed from a queue with limits:
	// the part of its wait that the limits held it back.
	limitWait *byQueue[prometheus.Observer]
	// steps are the series of durable steps (metrics_steps.go).
	steps *stepMetrics
}

// labelCache keeps what newItem returns for each key, made once: the
// series of a label value, which a vector would otherwise look up by
// hashing on every observation. It grows with the label values seen, as
// the vector it caches does; nothing deletes a vector's series.
type labelCache[K comparable, V any] struct {
	mu      sync.RWMutex
	m       map[K]V
	newItem func(K) V
}

func newLabelCache[K comparable, V any](newItem func(K) V) *labelCache[K, V] {
	return &labelCache[K, V]{m: make(map[K]V), newItem: newItem}
}

// get returns key's value, making it on first use.
func (c *labelCache[K, V]) get(key K) V {
	c.mu.RLock()
	v, ok := c.m[key]
	c.mu.RUnlock()
	if ok {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok = c.m[key]; !ok {
		v = c.newItem(key)
		c.m[key] = v
	}
	return v
}

// byQueue is a vector of one label, the queue, with its series cached:
// of(queue) is vec.WithLabelValues(queue) without the lookup.
type byQueue[M any] struct {
	vec    queueVec[M]
	series *labelCache[string, M]
}

// queueVec is a *prometheus.CounterVec (M a Counter) or HistogramVec (M
// an Observer) of the label "queue".
type queueVec[M any] interface {
	prometheus.Collector
	WithLabelValues(...string) M
}

func newByQueue[M any](vec queueVec[M]) *byQueue[M] {
	return &byQueue[M]{vec: vec, series: newLabelCache(func(q string) M { return vec.WithLabelValues(q) })}
}

func counterByQueue(opts prometheus.CounterOpts) *byQueue[prometheus.Counter] {
	return newByQueue[prometheus.Counter](prometheus.NewCounterVec(opts, []string{"queue"}))
}

func histogramByQueue(opts prometheus.HistogramOpts) *byQueue[prometheus.Observer] {
	return newByQueue[prometheus.Observer](prometheus.NewHistogramVec(opts, []string{"queue"}))
}

// of is the series of queue q.
func (b *byQueue[M]) of(q string) M { return b.series.get(q) }

// requestKey and requestSeries are a route and status's request series.
type requestKey struct {
	route  string
	status int
}

type requestSeries struct {
	count   prometheus.Counter
	latency prometheus.Observer
}

// waitBuckets are the buckets of the histograms of time waited, in seconds.
var waitBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600}

func newMetrics(reg *prometheus.Registry, s *Server) *metrics {
	m := &metrics{
		reg: reg,
		submitted: counterByQueue(prometheus.CounterOpts{
			Name: "workron_jobs_submitted_total", Help: "Jobs accepted by this node while leader.",
		}),
		completed: counterByQueue(prometheus.CounterOpts{
			Name: "workron_jobs_completed_total", Help: "Attempts reported done.",
		}),
		failed: counterByQueue(prometheus.CounterOpts{
			Name: "workron_jobs_failed_total", Help: "Jobs that failed for good.",
		}),
		retried: counterByQueue(prometheus.CounterOpts{
			Name: "workron_jobs_retried_total", Help: "Jobs sent back to pending for another attempt: after a failed or expired attempt, or by POST /jobs/{id}/retry.",
		}),
		expired: counterByQueue(prometheus.CounterOpts{
			Name: "workron_leases_expired_total", Help: "Attempts whose lease ran out.",
		}),
		claimed: counterByQueue(prometheus.CounterOpts{
			Name: "workron_jobs_claimed_total", Help: "Jobs leased to workers.",
		}),
		cancelled: counterByQueue(prometheus.CounterOpts{
			Name: "workron_jobs_cancelled_total", Help: "Jobs cancelled through the API (a running job counts when it is told to stop).",
		}),
		handedOff: counterByQueue(prometheus.CounterOpts{
			Name: "workron_jobs_handed_off_total", Help: "Jobs leased to a waiting worker in the log entry that submitted them (one commit round from submit to start).",
		}),
		startLatency: histogramByQueue(prometheus.HistogramOpts{
			Name:    "workron_job_start_latency_seconds",
			Help:    "From when an attempt could start (submission, run_at, unblocking or retry) to its claim.",
			Buckets: waitBuckets,
		}),
		limitWait: histogramByQueue(prometheus.HistogramOpts{
			Name: "workron_queue_limit_wait_seconds",
			Help: "Per attempt claimed from a queue with flow-control limits, or held back by a pause a rate-limited attempt asked for: " +
				"how long, since it became due, its queue's or its key's limits or pauses held it back (counted by the leader's state machine since it last started).",
			Buckets: waitBuckets,
		}),
		runDuration: histogramByQueue(prometheus.HistogramOpts{
			Name:    "workron_job_run_duration_seconds",
			Help:    "From an attempt's claim to its done or fail report.",
			Buckets: []float64{0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600, 7200, 21600},
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workron_http_requests_total", Help: "HTTP requests by route and status.",
		}, []string{"route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "workron_http_request_duration_seconds", Help: "HTTP request latency by route.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"route"}),
	}
	m.steps = newStepMetrics()
	m.byRequest = newLabelCache(func(k requestKey) requestSeries {
		return requestSeries{count: m.requests.WithLabelValues(k.route, strconv.Itoa(k.status)), latency: m.latency.WithLabelValues(k.route)}
	})
	reg.MustRegister(m.submitted.vec, m.completed.vec, m.failed.vec, m.retried.vec, m.expired.vec, m.claimed.vec, m.cancelled.vec, m.handedOff.vec,
		m.requests, m.latency, m.startLatency.vec, m.runDuration.vec, m.limitWait.vec)
	reg.MustRegister(m.steps.collectors()...)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(&stateCollector{s: s}, &raftCollector{s: s}, &diskCollector{s: s}, &parkCollector{s: s})
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

func (m *metrics) observeRequest(route string, status int, d time.Duration) {
	rs := m.byRequest.get(requestKey{route, status})
	rs.count.Inc()
	rs.latency.Observe(d.Seconds())
}

// finished counts a reported attempt by where the job went.
func (m *metrics) finished(j *store.Job) {
	switch j.Status {
	case store.StatusDone:
		m.completed.of(j.Queue).Inc()
	case store.StatusFailed:
		m.failed.of(j.Queue).Inc()
	case store.StatusPending:
		m.retried.of(j.Queue).Inc()
	}
}

// stateCollector reads queue depths at scrape time, from the state
// machine's in-memory counters and ready trees.
type stateCollector struct{ s *Server }

var (
	descDepth  = prometheus.NewDesc("workron_queue_jobs", "Jobs by queue and status (this node's state).", []string{"queue", "status"}, nil)
	descOldest = prometheus.NewDesc("workron_queue_oldest_pending_age_seconds",
		"How long the longest-waiting job that is due to run has waited since it became runnable (0 if none), by queue (this node's state).", []string{"queue"}, nil)
	descPaused = prometheus.NewDesc("workron_queue_paused", "1 if the queue is paused.", []string{"queue"}, nil)
	descHeld   = prometheus.NewDesc("workron_queue_jobs_held",
		"Due jobs that a flow-control limit or a pause holds back, by queue and limit (concurrency, rate, paused, key_concurrency, key_rate, key_paused; "+
			"a job counts once, under the first that holds it); queues with limits or a pause in force only.", []string{"queue", "limit"}, nil)
)

// heldLimits are the values of descHeld's limit label.
var heldLimits = []string{"concurrency", "rate", "paused", "key_concurrency", "key_rate", "key_paused"}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descDepth
	ch <- descOldest
	ch <- descPaused
	ch <- descHeld
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.s.now()
	oldest := c.s.state.OldestReady(now)
	for _, q := range c.s.state.Queues() {
		for st, n := range q.Counts {
			ch <- prometheus.MustNewConstMetric(descDepth, prometheus.GaugeValue, float64(n), q.Name, string(st))
		}
		age := 0.0
		if at, ok := oldest[q.Name]; ok && at < now {
			age = time.Duration(now - at).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, age, q.Name)
		ch <- prometheus.MustNewConstMetric(descPaused, prometheus.GaugeValue, boolValue(q.Paused), q.Name)
	}
	for _, q := range c.s.flowQueues(now) {
		held := c.s.state.QueueLimits(q).Held
		for _, l := range heldLimits {
			ch <- prometheus.MustNewConstMetric(descHeld, prometheus.GaugeValue, float64(held[l]), q, l)
		}
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
