package store

import "encoding/json"

// Status is a job's stored state. "scheduled" is not a stored status: it is a
// pending job whose RunAt is still in the future.
type Status string

// The stored statuses.
const (
	StatusBlocked    Status = "blocked"
	StatusPending    Status = "pending"
	StatusReserved   Status = "reserved" // a gang task held for one worker until it claims it
	StatusRunning    Status = "running"
	StatusCancelling Status = "cancelling"
	StatusDone       Status = "done"
	StatusFailed     Status = "failed"
	StatusCancelled  Status = "cancelled"
)

// StatusReturned appears in attempt histories only: the attempt did not
// count (its number is used again), because its claim reply never reached
// its worker, or because its worker never acknowledged it before its lease
// ran out (Expired is then set). Records write it as a string, outside the
// status codes.
const StatusReturned Status = "returned"

// StatusRateLimited and StatusSnoozed appear in attempt histories only: the
// worker said the attempt met a rate limit downstream (and paused its key)
// or asked to run the job again later. Neither counts against MaxAttempts.
const (
	StatusRateLimited Status = "rate_limited"
	StatusSnoozed     Status = "snoozed"
)

// StatusParked appears in attempt histories only: the attempt parked its
// job on a sleep, a wait or an invoke (issue #31) and ended there,
// without counting against MaxAttempts.
const StatusParked Status = "parked"

// Statuses lists every stored status, in lifecycle order.
var Statuses = []Status{StatusBlocked, StatusPending, StatusReserved, StatusRunning, StatusCancelling, StatusDone, StatusFailed, StatusCancelled}

// Finished reports whether s is a final status.
func (s Status) Finished() bool {
	return s == StatusDone || s == StatusFailed || s == StatusCancelled
}

// Leased reports whether a job in status s holds a worker's lease.
func (s Status) Leased() bool {
	return s == StatusRunning || s == StatusCancelling
}

// Valid reports whether s is one of the stored statuses.
func (s Status) Valid() bool {
	for _, v := range Statuses {
		if s == v {
			return true
		}
	}
	return false
}

// Backoff is a job's retry delay policy; durations in nanoseconds.
type Backoff struct {
	Base   int64   `json:"base,omitempty"`
	Max    int64   `json:"max,omitempty"`
	Jitter float64 `json:"jitter,omitempty"`
}

// Attempt records how one attempt of a job ended.
type Attempt struct {
	Attempt  int    `json:"n"`
	WorkerID string `json:"w,omitempty"`
	Lease    uint64 `json:"l"`
	Status   Status `json:"s"`
	ExitCode *int   `json:"x,omitempty"`
	Error    string `json:"e,omitempty"`
	Started  int64  `json:"st"`
	Ended    int64  `json:"en"`
	Expired  bool   `json:"xp,omitempty"` // ended by the reaper, not its worker
}

// Job is the stored record of one job. Times are Unix nanoseconds, 0 when
// unset; durations are nanoseconds. Seq orders jobs by submission.
type Job struct {
	ID             string            `json:"id"`
	Seq            uint64            `json:"seq"`
	Command        string            `json:"cmd,omitempty"`
	Type           string            `json:"type,omitempty"`
	Payload        json.RawMessage   `json:"payload,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	Metadata       map[string]string `json:"meta,omitempty"`
	Queue          string            `json:"q"`
	Priority       int               `json:"prio,omitempty"`
	Status         Status            `json:"st"`
	DependsOn      []string          `json:"deps,omitempty"`
	Waiting        int               `json:"waiting,omitempty"`
	Dependents     []string          `json:"dependents,omitempty"` // formats 1 and 2 only; now Tx.Dependents
	MaxAttempts    int               `json:"max_att"`
	Attempts       int               `json:"att,omitempty"`
	IdempotencyKey string            `json:"idem,omitempty"`
	Timeout        int64             `json:"timeout,omitempty"`
	Backoff        Backoff           `json:"backoff"`
	CreatedAt      int64             `json:"created"`
	RunAt          int64             `json:"run_at"`
	StartedAt      int64             `json:"started,omitempty"`
	DoneAt         int64             `json:"done,omitempty"`
	WorkerID       string            `json:"worker,omitempty"`
	Lease          uint64            `json:"lease,omitempty"`
	LeaseDeadline  int64             `json:"deadline,omitempty"`
	ExitCode       *int              `json:"exit,omitempty"`
	Output         string            `json:"out,omitempty"`
	LastError      string            `json:"err,omitempty"`
	History        []Attempt         `json:"hist,omitempty"`
	Retention      int64             `json:"retention,omitempty"`
	UniqueFor      int64             `json:"unique_for,omitempty"`
	ExpireAt       int64             `json:"expire_at,omitempty"`
	Schedule       string            `json:"sched,omitempty"`     // the schedule that fired it
	ScheduledFor   int64             `json:"sched_for,omitempty"` // the tick it belongs to
	After          string            `json:"after,omitempty"`     // blocked until this job finishes, however it ends
	Resources      Resources         `json:"res,omitzero"`        // what an attempt needs of its worker
	Tags           []string          `json:"tags,omitempty"`      // tags its worker must offer
	GangID         string            `json:"gang,omitempty"`      // the gang it is a task of
	GangIndex      int               `json:"gang_idx,omitempty"`  // its index in the gang, from 0
	GangSize       int               `json:"gang_size,omitempty"` // how many tasks the gang has
	PreemptEpoch   uint64            `json:"preempt,omitempty"`   // its gang drains: stop this attempt and acknowledge this epoch
	ModifyIndex    uint64            `json:"mod"`
	// How the last attempt was claimed (record jobRecordV2): the name of
	// the token that claimed it (empty with auth off), whether its worker
	// was handed the lease (then every report must carry it), and the
	// worker's number for the claim request (0: none).
	ClaimToken string `json:"claim_tok,omitempty"`
	Fenced     bool   `json:"fenced,omitempty"`
	ClaimSeq   uint64 `json:"claim_seq,omitempty"`
	// ConcurrencyKey groups the job with others of its queue for the
	// queue's per-key limits (record jobRecordV3); empty: none.
	ConcurrencyKey string `json:"ckey,omitempty"`
	// Set by commands of protocol 3 (record jobRecordV4): the W3C
	// traceparent of the job's trace (empty: none), the running attempt's
	// latest progress (nil: none reported), and the JSON result the job
	// returned (nil: none).
	TraceParent string          `json:"trace,omitempty"`
	Progress    *Progress       `json:"progress,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`
	// Set by claims of protocol 4 (record jobRecordV5): AwaitingAck says
	// the running attempt waits for its worker to acknowledge it (a
	// heartbeat that names it); Unacked counts the attempts of the job's
	// life that ended unacknowledged and did not count (fsm.MaxUnacked
	// bounds them).
	AwaitingAck bool `json:"await_ack,omitempty"`
	Unacked     int  `json:"unacked,omitempty"`
}

// Progress is how far a running attempt says it is: Percent from 0 to 100,
// a short Message, and when the cluster recorded it (Unix nanoseconds).
type Progress struct {
	Percent int    `json:"pct"`
	Message string `json:"msg,omitempty"`
	At      int64  `json:"at"`
}

// JobHead is what the FSM's in-memory indexes need of a job. A binary job
// record stores these fields first, so reading only them stops early (see
// Tx.ForEachJobHead).
type JobHead struct {
	ID            string
	Seq           uint64
	Status        Status
	Queue         string
	Type          string
	Priority      int
	RunAt         int64
	WorkerID      string
	Lease         uint64
	LeaseDeadline int64
	Resources     Resources
	Tags          []string
	Key           string // ConcurrencyKey
}

// Head returns the head fields of j.
func (j *Job) Head() JobHead {
	return JobHead{
		ID: j.ID, Seq: j.Seq, Status: j.Status, Queue: j.Queue, Type: j.Type, Priority: j.Priority,
		RunAt: j.RunAt, WorkerID: j.WorkerID, Lease: j.Lease, LeaseDeadline: j.LeaseDeadline,
		Resources: j.Resources, Tags: j.Tags, Key: j.ConcurrencyKey,
	}
}

func (j *Job) setHead(h *JobHead) {
	j.ID, j.Seq, j.Status, j.Queue, j.Type, j.Priority = h.ID, h.Seq, h.Status, h.Queue, h.Type, h.Priority
	j.RunAt, j.WorkerID, j.Lease, j.LeaseDeadline = h.RunAt, h.WorkerID, h.Lease, h.LeaseDeadline
	j.Resources, j.Tags, j.ConcurrencyKey = h.Resources, h.Tags, h.Key
}
