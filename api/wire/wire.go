// Package wire holds the JSON shapes of Workron's HTTP API: requests, replies
// and error bodies. The server (package api) and the clients (package worker,
// the CLI) share them, and the error codes (codes.go); it imports nothing of
// the server side and holds no logic beyond parsing durations, the rule for a
// job's environment variables, and which report results may be sent again.
package wire

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Job statuses, as shown in a Job's Status field.
const (
	StatusBlocked    = "blocked"    // waiting on dependencies
	StatusScheduled  = "scheduled"  // pending, but its run_at is in the future
	StatusPending    = "pending"    // claimable
	StatusReserved   = "reserved"   // a gang task held for one worker until it claims it
	StatusRunning    = "running"    // leased to a worker
	StatusCancelling = "cancelling" // running, and its worker was asked to stop
	StatusDone       = "done"
	StatusFailed     = "failed"
	StatusCancelled  = "cancelled"
)

// Heartbeat actions a worker may be told to take.
const (
	ActionCancel  = "cancel"
	ActionPreempt = "preempt"
)

// SubmitRequest is the body of POST /jobs. Unknown fields are ignored.
// MaxRetries and QueueName are the v0 worker API's names for MaxAttempts and
// Queue; they are accepted on submit and mean the same.
type SubmitRequest struct {
	Command        string            `json:"command,omitempty"`
	Type           string            `json:"type,omitempty"`
	Payload        json.RawMessage   `json:"payload,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	DependsOn      []string          `json:"depends_on,omitempty"`
	MaxAttempts    *int              `json:"max_attempts,omitempty"`
	MaxRetries     *int              `json:"max_retries,omitempty"`
	Queue          string            `json:"queue,omitempty"`
	QueueName      string            `json:"queue_name,omitempty"`
	Priority       int               `json:"priority,omitempty"`
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
	Timeout        string            `json:"timeout,omitempty"`
	RunAt          *time.Time        `json:"run_at,omitempty"`
	Delay          string            `json:"delay,omitempty"`
	Backoff        *Backoff          `json:"backoff,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	Retention      string            `json:"retention,omitempty"`
	UniqueFor      string            `json:"unique_for,omitempty"`
	// Resources and Tags are what each attempt needs of its worker: a job
	// is claimed only by a worker with that much free and every tag.
	Resources *Resources `json:"resources,omitempty"`
	Tags      []string   `json:"tags,omitempty"`
	// GangSize, when not 0, makes POST /jobs create a gang of that many
	// tasks that run together on distinct workers (see Gang).
	GangSize int `json:"gang_size,omitempty"`
	// ConcurrencyKey groups the job for its queue's per-key limits (see
	// QueueLimits): a tenant, a customer, an API account.
	ConcurrencyKey string `json:"concurrency_key,omitempty"`
}

// Backoff configures the delay before a retry: min(base·2^(attempt-1), max),
// plus a random extra of up to Jitter times that (0.3 = up to +30 %).
type Backoff struct {
	Base   string  `json:"base,omitempty"`
	Max    string  `json:"max,omitempty"`
	Jitter float64 `json:"jitter,omitempty"`
}

// BatchSubmitRequest is the body of POST /jobs/batch.
type BatchSubmitRequest struct {
	Jobs []SubmitRequest `json:"jobs"`
}

// BatchSubmitIDs is the reply of POST /jobs/batch to a request that
// carries the header Prefer: return=minimal (PreferMinimal): the jobs' ids
// in the order of the request, where the full reply (a JobList) would show
// the jobs. A job whose idempotency key matched a retained job is that
// job's id, as the full reply shows that job; neither reply says which
// jobs are new.
type BatchSubmitIDs struct {
	IDs []string `json:"ids"`
	// Warnings are as in the full reply (JobList).
	Warnings []string `json:"warnings,omitempty"`
}

// The Prefer request header (RFC 7240) with the one preference the API
// honours, and the reply header that says it was: POST /jobs/batch then
// answers a BatchSubmitIDs instead of the jobs.
const (
	HeaderPrefer            = "Prefer"
	HeaderPreferenceApplied = "Preference-Applied"
	PreferMinimal           = "return=minimal"
)

// Job is a job as the API shows it.
//
// MaxAttempts is how many times the job may run, the first run included:
// with 3 it runs at most 3 times (a failed attempt is retried while
// Attempts < MaxAttempts). Attempts counts the attempts so far that count
// against it (a retry by hand starts it again from 0; AttemptHistory keeps
// them). MaxRetries is the v0 worker API's name for MaxAttempts, always
// equal to it and kept because v0 workers and clients read it: despite its
// name it counts attempts, not retries after the first.
type Job struct {
	ID             string            `json:"id"`
	Command        string            `json:"command,omitempty"`
	Type           string            `json:"type,omitempty"`
	Payload        json.RawMessage   `json:"payload,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	Status         string            `json:"status"`
	Queue          string            `json:"queue"`
	Priority       int               `json:"priority"`
	Attempts       int               `json:"attempts"`
	MaxAttempts    int               `json:"max_attempts"`
	MaxRetries     int               `json:"max_retries"`
	DependsOn      []string          `json:"depends_on,omitempty"`
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
	Timeout        string            `json:"timeout,omitempty"`
	Backoff        *Backoff          `json:"backoff,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	CreatedAt      time.Time         `json:"created_at"`
	RunAt          time.Time         `json:"run_at"`
	StartedAt      *time.Time        `json:"started_at,omitempty"`
	DoneAt         *time.Time        `json:"done_at,omitempty"`
	WorkerID       string            `json:"worker_id,omitempty"`
	Lease          uint64            `json:"lease,omitempty"`
	LeaseExpiresAt *time.Time        `json:"lease_expires_at,omitempty"`
	ExitCode       *int              `json:"exit_code,omitempty"`
	Output         string            `json:"output,omitempty"`
	LastError      string            `json:"last_error,omitempty"`
	AttemptHistory []Attempt         `json:"attempt_history,omitempty"`
	Retention      string            `json:"retention,omitempty"`
	UniqueFor      string            `json:"unique_for,omitempty"`
	ExpiresAt      *time.Time        `json:"expires_at,omitempty"`
	Schedule       string            `json:"schedule,omitempty"`      // the schedule that created it
	ScheduledFor   *time.Time        `json:"scheduled_for,omitempty"` // the tick it belongs to
	After          string            `json:"after,omitempty"`         // blocked until this previous run ends
	Resources      *Resources        `json:"resources,omitempty"`     // what an attempt needs of its worker
	Tags           []string          `json:"tags,omitempty"`          // tags its worker must offer
	GangID         string            `json:"gang_id,omitempty"`
	GangIndex      *int              `json:"gang_index,omitempty"`
	GangSize       int               `json:"gang_size,omitempty"`
	// PreemptionEpoch is set while the job's gang drains and this attempt
	// must stop: acknowledge it with POST /jobs/{id}/preempted?epoch=N.
	PreemptionEpoch uint64 `json:"preemption_epoch,omitempty"`
	// Unschedulable says why no active worker could ever run the job as it
	// asks (computed when read), e.g. "needs 40960 MB VRAM; largest worker
	// has 24576".
	Unschedulable string `json:"unschedulable,omitempty"`
	// ConcurrencyKey is the job's key for its queue's per-key limits.
	ConcurrencyKey string `json:"concurrency_key,omitempty"`
	// TraceParent is the W3C traceparent of the job's trace: the span of
	// its submit (or, on a node that exports no spans, the caller's
	// traceparent header). A worker runs each attempt as a child of it and
	// gives it to the job's process as TRACEPARENT.
	TraceParent string `json:"traceparent,omitempty"`
	// Waiting says, for a job that is neither running nor finished, why
	// it waits, and WaitingCode which reason that is (one of the Wait*
	// codes), e.g. "no_worker" and "no active worker serves queue emails".
	// Computed when read, in GET /jobs, GET /jobs/{id} and GET /gangs/{id}.
	Waiting     string `json:"waiting,omitempty"`
	WaitingCode string `json:"waiting_code,omitempty"`
	// Warnings, in the reply of a submission only, name what the server
	// ignored in the request, e.g. `unknown field "priorty"`.
	Warnings []string `json:"warnings,omitempty"`
	// Progress is the latest progress of the running (or last) attempt,
	// absent when it reported none; Result is the JSON the job returned,
	// absent when none. ParentResults, in a claim reply only, are the
	// results of the jobs it depends on, by id (those without one left out).
	Progress      *Progress                  `json:"progress,omitempty"`
	Result        json.RawMessage            `json:"result,omitempty"`
	ParentResults map[string]json.RawMessage `json:"parent_results,omitempty"`
	// ParentResultsTruncated, in a claim reply only, says ParentResults
	// may lack some parents' results: a claim carries at most
	// MaxClaimJobParentBytes of them per job and MaxClaimParentBytes in
	// all. ParentResultsCursor is then where the rest begin: pass it as
	// ?cursor= to GET /jobs/{id}/parent_results, page after page, for
	// every parent's result exactly once.
	ParentResultsTruncated bool   `json:"parent_results_truncated,omitempty"`
	ParentResultsCursor    string `json:"parent_results_cursor,omitempty"`
	// Journal is the job's recorded steps (steps.go): set, in a claim
	// reply and GET /jobs/{id}, when it has any.
	Journal *Journal `json:"journal,omitempty"`
	// Parked says what a parked job waits for (a sleep, a wait or an
	// invoke); absent when it is not parked.
	Parked *Parked `json:"parked,omitempty"`
}

// Bounds of the parent results a reply carries, in bytes of JSON (each
// result with its parent's id): a job with 1,000 parents of 64 KiB results
// would otherwise make one claim of 10 such jobs a 655 MB reply.
const (
	// MaxClaimJobParentBytes bounds the parent results of one job in a
	// claim reply.
	MaxClaimJobParentBytes = 1 << 20
	// MaxClaimParentBytes bounds the parent results of all the jobs of
	// one claim reply.
	MaxClaimParentBytes = 4 << 20
	// MaxParentResultsPageBytes bounds one page of GET
	// /jobs/{id}/parent_results; a page holds at least one result.
	MaxParentResultsPageBytes = 4 << 20
)

// ParentResultsPage is the reply of GET /jobs/{id}/parent_results: the
// results of the job's parents from ?cursor= on, in the order of its
// depends_on (parents without a result, or deleted, left out), at most
// MaxParentResultsPageBytes. NextCursor, when not empty, is where the next
// page begins; it is empty on the last page.
type ParentResultsPage struct {
	ParentResults map[string]json.RawMessage `json:"parent_results"`
	NextCursor    string                     `json:"next_cursor,omitempty"`
}

// The codes of Job.WaitingCode: why a job that is not running waits.
const (
	WaitDependency = "dependency" // a job it depends on, or the previous run of its schedule, has not ended
	WaitPaused     = "paused"     // its queue is paused
	WaitNoWorker   = "no_worker"  // no active worker serves its queue
	WaitResources  = "resources"  // no active worker of its queue offers its resources or tags (or enough for its gang)
	WaitDelay      = "delay"      // its run_at is ahead: submitted for later, or a retry's backoff
	WaitLimit      = "limit"      // a flow-control limit of its queue or key holds it back (concurrency or rate)
	WaitGang       = "gang"       // its gang waits for enough free workers at once
	WaitClaim      = "claim"      // its gang is placed; its worker has not claimed it yet
	WaitWorker     = "worker"     // ready: waits for a worker of its queue to take it
)

// GangSubmitResponse is the reply of POST /jobs with a gang_size: the gang
// and its tasks' job ids by index.
type GangSubmitResponse struct {
	GangID string   `json:"gang_id"`
	Tasks  []string `json:"tasks"`
	// Warnings name what the server ignored in the request (see Job).
	Warnings []string `json:"warnings,omitempty"`
}

// Gang is the reply of GET /gangs/{id}. Epoch counts its reservations and
// drains; Workers are the workers of its tasks, by index, while it is
// reserved, running or draining.
type Gang struct {
	GangID        string     `json:"gang_id"`
	Size          int        `json:"size"`
	Status        string     `json:"status"`
	Epoch         uint64     `json:"epoch"`
	Tasks         []string   `json:"tasks"`
	Workers       []string   `json:"workers,omitempty"`
	Queue         string     `json:"queue"`
	Priority      int        `json:"priority"`
	Resources     *Resources `json:"resources,omitempty"`
	Tags          []string   `json:"tags,omitempty"`
	RunAt         *time.Time `json:"run_at,omitempty"`
	ReservedAt    *time.Time `json:"reserved_at,omitempty"`
	DrainStarted  *time.Time `json:"drain_started_at,omitempty"`
	LastError     string     `json:"last_error,omitempty"`
	Unschedulable string     `json:"unschedulable,omitempty"`
	Jobs          []Job      `json:"jobs"`
}

// Attempt records how one finished attempt of a job ended.
type Attempt struct {
	Attempt  int       `json:"attempt"`
	WorkerID string    `json:"worker_id,omitempty"`
	Lease    uint64    `json:"lease"`
	Status   string    `json:"status"`
	ExitCode *int      `json:"exit_code,omitempty"`
	Error    string    `json:"error,omitempty"`
	Started  time.Time `json:"started_at"`
	Ended    time.Time `json:"ended_at"`
	// Expired is set when the cluster ended the attempt (its lease ran out,
	// it timed out, its worker went offline), not its worker's report.
	Expired bool `json:"expired,omitempty"`
}

// JobList is the reply of GET /jobs: newest first; pass NextCursor as
// ?cursor= to get the next page. NextCursor is empty on the last page.
type JobList struct {
	Jobs       []Job  `json:"jobs"`
	NextCursor string `json:"next_cursor,omitempty"`
	// Scanned, in the reply of GET /jobs, is how many jobs the server
	// examined for this page (absent: none).
	Scanned int `json:"scanned,omitempty"`
	// Partial, in the reply of GET /jobs, says the page ended before it
	// was full because the server's scan budget ran out, not because the
	// jobs did: more may match from NextCursor on. A page without
	// NextCursor is the last; one with NextCursor and without Partial is
	// full.
	Partial bool `json:"partial,omitempty"`
	// Warnings, in the reply of POST /jobs/batch only, name what the
	// server ignored in the request, e.g. `unknown field "jobs[1].priorty"`.
	Warnings []string `json:"warnings,omitempty"`
}

// JobCount is the reply of GET /jobs/count: how many jobs, of those the
// request examined, its filter keeps, in all and by status (the status the
// API shows, "scheduled" included; statuses with none are absent). Exact
// says the count covers every job from the cursor on; otherwise the scan
// budget ran out after Scanned jobs, and the request again with
// NextCursor counts the rest (add the counts up).
type JobCount struct {
	Count      int            `json:"count"`
	ByStatus   map[string]int `json:"by_status"`
	Exact      bool           `json:"exact"`
	Scanned    int            `json:"scanned"`
	NextCursor string         `json:"next_cursor,omitempty"`
}

// Health statuses, as shown in Health.Status and NodeHealth.Status.
const (
	HealthOK         = "ok"
	HealthNoLeader   = "no_leader"   // the node knows no leader
	HealthRemoved    = "removed"     // the node was removed from the cluster
	HealthCatchingUp = "catching_up" // ?ready=1: not every committed entry applied yet
)

// Error is every error body: a sentence for people and a word for programs.
type Error struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// MaxDuration is the longest duration a request may give (100 years):
// added to today's time in nanoseconds it still fits an int64.
const MaxDuration = 100 * 365 * 24 * time.Hour

// ParseDuration parses a Go duration ("90s", "1h30m") and names the field
// in its error. Negative durations and ones over MaxDuration are refused.
func ParseDuration(field, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a duration like \"90s\" or \"5m\"", field, s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%s: must not be negative, got %s", field, s)
	}
	if d > MaxDuration {
		return 0, fmt.Errorf("%s: must be at most %s (100 years), got %s", field, MaxDuration, s)
	}
	return d, nil
}

// LoaderEnvPrefix starts the names of the dynamic loader's variables
// (LD_PRELOAD, LD_LIBRARY_PATH, ...). A job's env may not set them: they
// choose code that runs inside every program the job starts. A worker passes
// its own value of one to its jobs when its operator lists it in
// --pass-env (worker.Config.PassEnv).
const LoaderEnvPrefix = "LD_"

// CheckEnvVar reports why a job may not carry the environment variable
// name=value, naming field (like "env") in the error, or nil when it may:
// the name must be non-empty, without '=' or NUL, and not a loader variable
// (LoaderEnvPrefix); the value must not hold NUL. The server checks it at
// submit; workers check it again before they start a command.
func CheckEnvVar(field, name, value string) error {
	switch {
	case name == "":
		return fmt.Errorf("%s: a variable name must not be empty", field)
	case strings.ContainsAny(name, "=\x00"):
		return fmt.Errorf("%s: variable name %q must not contain '=' or NUL", field, name)
	case strings.HasPrefix(name, LoaderEnvPrefix):
		return fmt.Errorf("%s.%s: a job may not set the dynamic loader's variables (LD_*); a worker passes its own with --pass-env", field, name)
	case strings.ContainsRune(value, 0):
		return fmt.Errorf("%s.%s: the value must not contain NUL", field, name)
	}
	return nil
}
