package wire

import (
	"encoding/json"
	"time"
)

// The worker's side of the API: claims, reports, heartbeats, worker
// records and the actions a worker is told to take.

// MaxQueues is the most queues a claim or a registered worker may name, and
// MaxTypes the most types a claim may name: a claim looks at each queue and
// type pair under the lock that applies entries.
const (
	MaxQueues = 32
	MaxTypes  = 64
)

// ClaimRequest is the body of POST /jobs/claim. Queues lists the queues the
// worker serves in order of preference (none means "default"). Types lists the
// typed-handler job types it serves; it gets shell-command jobs when Shell is
// true or Types is empty. Max caps how many jobs one claim returns (default 1).
// Wait is a Go duration ("30s") to long-poll for; the server caps it.
type ClaimRequest struct {
	WorkerID string   `json:"worker_id"`
	Queues   []string `json:"queues,omitempty"`
	Types    []string `json:"types,omitempty"`
	Shell    bool     `json:"shell,omitempty"`
	// Reports end attempts in the same round trip (a worker reporting the
	// job it just finished while asking for the next); the reply's Reports
	// answers them in order, as POST /jobs/reports does.
	Reports []BatchReport `json:"reports,omitempty"`
	Max     int           `json:"max,omitempty"`
	Wait    string        `json:"wait,omitempty"`
	// ClaimSeq is the worker's number for this request (0: none), higher
	// than any it sent before in this run: see WorkerHeartbeatRequest.
	ClaimSeq uint64 `json:"claim_seq,omitempty"`
}

// ClaimResponse is the reply of POST /jobs/claim. LeaseTTLMillis tells the
// worker how long a lease lasts without a heartbeat.
type ClaimResponse struct {
	Jobs           []Job               `json:"jobs"`
	LeaseTTLMillis int64               `json:"lease_ttl_ms"`
	Reports        []BatchReportResult `json:"reports,omitempty"`
}

// ReportRequest is the optional body of POST /jobs/{id}/done and /fail. A zero
// Lease means "the current attempt" (v0 workers send no body). Retry
// false on /fail makes the failure final.
//
// RateLimitedFor and SnoozeFor (Go durations such as "30s", at most
// MaxHoldOff; one at most, on a failure only) end the attempt without
// counting it against max_attempts, and the job is pending again.
// RateLimitedFor says the work met a rate limit downstream: the job's
// concurrency_key (with none, its queue) is paused for that long for every
// worker, and Error says why. SnoozeFor runs the job again that long from
// now, pausing nothing. The attempt's history status is "rate_limited" or
// "snoozed".
type ReportRequest struct {
	Lease          uint64 `json:"lease,omitempty"`
	ExitCode       *int   `json:"exit_code,omitempty"`
	Output         string `json:"output,omitempty"`
	Error          string `json:"error,omitempty"`
	Retry          *bool  `json:"retry,omitempty"`
	RateLimitedFor string `json:"rate_limited_for,omitempty"`
	SnoozeFor      string `json:"snooze_for,omitempty"`
	// Result is the JSON the attempt returned (at most MaxResultBytes;
	// null or absent: none): it replaces the job's result. Progress is the
	// attempt's last progress when no heartbeat carried it: the job keeps it.
	Result   json.RawMessage `json:"result,omitempty"`
	Progress *ProgressUpdate `json:"progress,omitempty"`
	// TraceParent is the W3C traceparent of the attempt's run span: the
	// node's span of the report is its child. Empty: the job's trace.
	TraceParent string `json:"traceparent,omitempty"`
}

// MaxHoldOff bounds a report's RateLimitedFor and SnoozeFor.
const MaxHoldOff = 24 * time.Hour

// History statuses of attempts that did not count against MaxAttempts: the
// worker said rate-limited or snoozed (see ReportRequest), the attempt
// was returned because its claim never reached its worker or its worker
// never acknowledged it (its number is used again), or it parked on a
// durable sleep, wait or invoke (its error says which step; its number is
// used again when the job wakes).
const (
	AttemptRateLimited = "rate_limited"
	AttemptSnoozed     = "snoozed"
	AttemptReturned    = "returned"
	AttemptParked      = "parked"
)

// BatchReportRequest is the body of POST /jobs/reports: several attempts
// ended at once (at most MaxBatchReports). Status is "done" or "failed".
type BatchReportRequest struct {
	Reports []BatchReport `json:"reports"`
}

// BatchReport is one attempt's end in a BatchReportRequest.
type BatchReport struct {
	JobID  string `json:"job_id"`
	Status string `json:"status"`
	ReportRequest
}

// BatchReportResponse answers each report in order: the job's status after
// it, or the error that refused it (the others still apply).
type BatchReportResponse struct {
	Results []BatchReportResult `json:"results"`
}

// BatchReportResult is the answer to one BatchReport.
type BatchReportResult struct {
	JobID  string `json:"job_id"`
	Status string `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
	Code   string `json:"code,omitempty"`
}

// MaxBatchReports is the most reports one POST /jobs/reports may carry.
const MaxBatchReports = 1000

// HeartbeatRequest is the optional body of POST /jobs/{id}/heartbeat.
// Progress, when set, is the attempt's latest progress, kept with the job
// as a worker heartbeat's (JobLease.Progress).
type HeartbeatRequest struct {
	Lease    uint64          `json:"lease,omitempty"`
	Progress *ProgressUpdate `json:"progress,omitempty"`
}

// HeartbeatResponse is the reply of a job heartbeat. Action is empty,
// "cancel" when the job was cancelled while running, or "preempt" (with
// PreemptionEpoch) when its gang drains.
type HeartbeatResponse struct {
	Action          string     `json:"action,omitempty"`
	PreemptionEpoch uint64     `json:"preemption_epoch,omitempty"`
	LeaseExpiresAt  *time.Time `json:"lease_expires_at,omitempty"`
}

// Resources are what a worker offers or a job needs.
type Resources struct {
	VRAMMB    int `json:"vram_mb"`
	MemoryMB  int `json:"memory_mb"`
	CPUMillis int `json:"cpu_millis,omitempty"`
	Slots     int `json:"slots,omitempty"`
}

// Worker is the body of POST /workers/register and an entry of GET /workers.
type Worker struct {
	ID            string    `json:"id"`
	ExecAddr      string    `json:"exec_addr,omitempty"`
	Resources     Resources `json:"resources"`
	Tags          []string  `json:"tags,omitempty"`
	Queues        []string  `json:"queues,omitempty"`
	Status        string    `json:"status,omitempty"`
	LastHeartbeat time.Time `json:"last_heartbeat"`
	RegisteredAt  time.Time `json:"registered_at"`
	RunningJobs   int       `json:"running_jobs"`
}

// WorkerList is the reply of GET /workers: a page of workers in id order,
// and NextCursor, the cursor of the next page ("" after the last).
type WorkerList struct {
	Workers    []Worker `json:"workers"`
	NextCursor string   `json:"next_cursor,omitempty"`
}

// Queue is one queue in GET /queues, and the reply of POST
// /queues/{name}/pause and /resume (Name and Paused alone).
type Queue struct {
	Name   string         `json:"name"`
	Paused bool           `json:"paused"`
	Counts map[string]int `json:"counts"`
	// OldestPendingSeconds is how long the longest-waiting runnable job of
	// the queue has been runnable; absent when none is.
	OldestPendingSeconds float64 `json:"oldest_pending_seconds,omitempty"`
	// Limits are the queue's flow-control limits, absent when it has none.
	Limits *QueueFlow `json:"limits,omitempty"`
}

// QueueList is the reply of GET /queues: the queues that hold jobs, were
// paused or have limits, a page at a time in name order (at most the
// request's limit, 100 without one, up to 1000); NextCursor, while more
// follow, is the cursor of the next page.
type QueueList struct {
	Queues     []Queue `json:"queues"`
	NextCursor string  `json:"next_cursor,omitempty"`
}

// CheckpointReply is the reply of POST /jobs/{id}/checkpoint: the
// checkpoint stored for the job's drain of Epoch.
type CheckpointReply struct {
	JobID string `json:"job_id"`
	Epoch uint64 `json:"epoch"`
	Bytes int    `json:"bytes"`
}

// WorkerHeartbeatRequest is the optional body of POST /workers/{id}/heartbeat.
// When Jobs is present (even empty), only those leases are renewed: a job
// whose claim reply the worker never received is then left to expire. With
// no body (v0 workers) every lease the worker holds is renewed.
//
// ClaimsFrom and ClaimsTo (both 0: none) are the range of ClaimSeq numbers
// of this run's claim requests that had all ended (answered or failed) when
// the worker sent the heartbeat. An attempt claimed by one of them and not
// in Jobs never reached the worker (its reply was lost): it goes back to
// pending at once, and does not count as an attempt.
type WorkerHeartbeatRequest struct {
	Jobs       []JobLease `json:"jobs"`
	ClaimsFrom uint64     `json:"claims_from,omitempty"`
	ClaimsTo   uint64     `json:"claims_to,omitempty"`
}

// JobLease names one attempt a worker is running, and (Progress, when
// set) how far it is: the cluster keeps the latest with the job.
type JobLease struct {
	JobID    string          `json:"job_id"`
	Lease    uint64          `json:"lease"`
	Progress *ProgressUpdate `json:"progress,omitempty"`
}

// WorkerHeartbeatResponse is the reply of POST /workers/{id}/heartbeat: how
// many leases were renewed, until when, and what the worker must do. Lost
// names the leases the request's Jobs listed that were not renewed (absent
// when none, or when the request lists no Jobs): the worker must stop
// those attempts and report nothing for them.
type WorkerHeartbeatResponse struct {
	Renewed        int         `json:"renewed"`
	LeaseExpiresAt *time.Time  `json:"lease_expires_at,omitempty"`
	Actions        []JobAction `json:"actions,omitempty"`
	Lost           []LostLease `json:"lost,omitempty"`
}

// LostLease names a lease a worker heartbeat listed and did not renew, and
// why: Reason is CodeNotRunning (the attempt ended: its lease expired and
// the job was taken back, it was reported, or given back), CodeStaleLease
// (the job moved on to another attempt, or the lease never was this
// worker's) or CodeNotFound (no such job).
type LostLease struct {
	JobID  string `json:"job_id"`
	Lease  uint64 `json:"lease"`
	Reason string `json:"reason"`
}

// WorkerActionsRequest is the body of POST /workers/{id}/actions, a
// long-poll that answers as soon as an attempt the worker holds must stop
// (its job was cancelled, its gang drains), or with no action after Wait
// (a Go duration, "30s", capped by the server's --max-wait). It proposes
// nothing and renews no lease: heartbeats still do. Known lists the
// attempts the worker already acts on (their actions are left out, so the
// poll does not answer them again); at most 10,000.
type WorkerActionsRequest struct {
	Known []JobLease `json:"known,omitempty"`
	Wait  string     `json:"wait,omitempty"`
}

// WorkerActionsResponse is the reply of POST /workers/{id}/actions: what
// the worker must do with its attempts, the same actions a heartbeat's
// reply carries (none when the wait ended first).
type WorkerActionsResponse struct {
	Actions []JobAction `json:"actions"`
}

// JobAction tells a worker to act on one of its jobs.
type JobAction struct {
	JobID           string `json:"job_id"`
	Lease           uint64 `json:"lease"`
	Action          string `json:"action"`
	PreemptionEpoch uint64 `json:"preemption_epoch,omitempty"`
}
