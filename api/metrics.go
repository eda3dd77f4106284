package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/workron/workron/store"
)

// metrics are the node's Prometheus series. Queue depths and Raft figures
// are read at scrape time from in-memory counters, never by scanning jobs.
type metrics struct {
	reg       *prometheus.Registry
	submitted *prometheus.CounterVec
	completed *prometheus.CounterVec
	failed    *prometheus.CounterVec
	retried   *prometheus.CounterVec
	expired   *prometheus.CounterVec
	claimed   prometheus.Counter
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
}

func newMetrics(reg *prometheus.Registry, s *Server) *metrics {
	m := &metrics{
		reg: reg,
		submitted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workron_jobs_submitted_total", Help: "Jobs accepted by this node while leader.",
		}, []string{"queue"}),
		completed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workron_jobs_completed_total", Help: "Attempts reported done.",
		}, []string{"queue"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workron_jobs_failed_total", Help: "Jobs that failed for good.",
		}, []string{"queue"}),
		retried: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workron_jobs_retried_total", Help: "Failed attempts that were scheduled for a retry.",
		}, []string{"queue"}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workron_leases_expired_total", Help: "Attempts whose lease ran out.",
		}, []string{"queue"}),
		claimed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "workron_jobs_claimed_total", Help: "Jobs leased to workers.",
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workron_http_requests_total", Help: "HTTP requests by route and status.",
		}, []string{"route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "workron_http_request_duration_seconds", Help: "HTTP request latency by route.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"route"}),
	}
	reg.MustRegister(m.submitted, m.completed, m.failed, m.retried, m.expired, m.claimed, m.requests, m.latency)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(&stateCollector{s: s})
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

func (m *metrics) observeRequest(route string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(route).Observe(d.Seconds())
}

// finished counts a reported attempt by where the job went.
func (m *metrics) finished(j *store.Job) {
	switch j.Status {
	case store.StatusDone:
		m.completed.WithLabelValues(j.Queue).Inc()
	case store.StatusFailed:
		m.failed.WithLabelValues(j.Queue).Inc()
	case store.StatusPending:
		m.retried.WithLabelValues(j.Queue).Inc()
	}
}

// stateCollector reads queue depths and Raft figures at scrape time.
type stateCollector struct{ s *Server }

var (
	descDepth    = prometheus.NewDesc("workron_queue_jobs", "Jobs by queue and status (this node's state).", []string{"queue", "status"}, nil)
	descRole     = prometheus.NewDesc("workron_raft_leader", "1 if this node is the leader.", nil, nil)
	descTerm     = prometheus.NewDesc("workron_raft_term", "Current Raft term.", nil, nil)
	descCommit   = prometheus.NewDesc("workron_raft_commit_index", "Raft commit index.", nil, nil)
	descApplied  = prometheus.NewDesc("workron_raft_applied_index", "Index applied to the state machine.", nil, nil)
	descEntries  = prometheus.NewDesc("workron_raft_entries_proposed_total", "Log entries proposed by this node.", nil, nil)
	descCommands = prometheus.NewDesc("workron_raft_commands_proposed_total", "Commands packed into those entries.", nil, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDepth, descRole, descTerm, descCommit, descApplied, descEntries, descCommands} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	for _, q := range c.s.state.Queues() {
		for st, n := range q.Counts {
			ch <- prometheus.MustNewConstMetric(descDepth, prometheus.GaugeValue, float64(n), q.Name, string(st))
		}
	}
	st := c.s.node.Stats()
	leader := 0.0
	if c.s.node.IsLeader() {
		leader = 1
	}
	ch <- prometheus.MustNewConstMetric(descRole, prometheus.GaugeValue, leader)
	ch <- prometheus.MustNewConstMetric(descTerm, prometheus.GaugeValue, float64(st.Term))
	ch <- prometheus.MustNewConstMetric(descCommit, prometheus.GaugeValue, float64(st.CommitIndex))
	ch <- prometheus.MustNewConstMetric(descApplied, prometheus.GaugeValue, float64(st.AppliedIndex))
	ch <- prometheus.MustNewConstMetric(descEntries, prometheus.CounterValue, float64(st.Entries))
	ch <- prometheus.MustNewConstMetric(descCommands, prometheus.CounterValue, float64(st.Commands))
}
