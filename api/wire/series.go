package wire

import "time"

// Series is the reply of GET /stats/series: what the jobs of the answering
// node's state say happened in each step of [From, To). Point i of every
// list covers [From + i*Step, From + (i+1)*Step). The series are computed
// from the job records when asked (see docs/api.md): two nodes at the same
// AppliedIndex give the same series, so a chart survives a failover.
//
// The request examines at most a budget of jobs, newest first, then the
// older jobs still waiting or running. Partial says it ran out: then
// CompleteFrom, when set, is the creation time of the oldest job it
// examined (jobs created before it are not counted); unset, the older
// waiting jobs were not all counted, and Depth may be short in any step.
// Jobs deleted by their retention are no longer counted.
type Series struct {
	From         time.Time  `json:"from"`
	To           time.Time  `json:"to"`
	StepSeconds  int64      `json:"step_seconds"`
	AppliedIndex uint64     `json:"applied_index"`
	Scanned      int        `json:"scanned"`
	Partial      bool       `json:"partial"`
	CompleteFrom *time.Time `json:"complete_from,omitempty"`
	// Total sums every queue. Queues holds one entry per queue (the one
	// asked for with ?queue=, or the first MaxSeriesQueues met, newest job
	// first), by name; QueuesLeftOut says jobs of other queues were
	// counted in Total only.
	Total         QueueSeries   `json:"total"`
	Queues        []QueueSeries `json:"queues"`
	QueuesLeftOut bool          `json:"queues_left_out,omitempty"`
}

// QueueSeries is one queue's points (Queue is empty in Series.Total).
// Submitted counts jobs created in the step; Started first attempts begun;
// Done, Failed and Cancelled jobs that ended so. Depth is how many jobs
// were due and waiting for their first attempt at the end of the step (or
// now, for the step under way). LatencyP50MS and LatencyP95MS are the
// percentiles of submit → first start, in milliseconds, of the jobs
// started in the step (a job's submit being its run_at when that was
// later), each within a factor of 1.42 of the exact one; 0 with no start.
type QueueSeries struct {
	Queue        string  `json:"queue,omitempty"`
	Submitted    []int   `json:"submitted"`
	Started      []int   `json:"started"`
	Done         []int   `json:"done"`
	Failed       []int   `json:"failed"`
	Cancelled    []int   `json:"cancelled"`
	Depth        []int   `json:"depth"`
	LatencyP50MS []int64 `json:"latency_p50_ms"`
	LatencyP95MS []int64 `json:"latency_p95_ms"`
}

// Bounds of GET /stats/series.
const (
	MaxSeriesPoints = 720 // (to - from) / step
	MaxSeriesQueues = 20
)
