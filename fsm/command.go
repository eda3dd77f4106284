package fsm

import (
	"encoding/json"

	"github.com/workron/workron/store"
)

// Op names a command.
type Op string

// The commands. Every state change is one of these.
const (
	OpSubmit          Op = "submit"
	OpClaim           Op = "claim"
	OpHeartbeat       Op = "heartbeat"
	OpWorkerHeartbeat Op = "worker_heartbeat"
	OpReport          Op = "report"
	OpExpire          Op = "expire"
	OpRegister        Op = "register"
	OpCancel          Op = "cancel"
	OpRetry           Op = "retry"
	OpRetryDependents Op = "retry_deps" // a retry that revives dependents
	OpSetNode         Op = "set_node"
	OpRemoveNode      Op = "remove_node"
	OpPauseQueue      Op = "pause_queue"
	OpDelete          Op = "delete"
	OpPutSchedule     Op = "put_schedule"
	OpDeleteSchedule  Op = "delete_schedule"
	OpPauseSchedule   Op = "pause_schedule"
	OpFire            Op = "fire"
	OpSubmitGang      Op = "submit_gang"
	OpReserveGang     Op = "reserve_gang"
	OpUnreserveGang   Op = "unreserve_gang"
	OpForceDrain      Op = "force_drain"
	OpWorkerOffline   Op = "worker_offline"
	OpPreempted       Op = "preempted"
	OpCheckpoint      Op = "checkpoint"
	OpForgetWorker    Op = "forget_worker" // protocol 2, see opProtocol
	OpSetQueueLimits  Op = "set_queue_limits"
	OpPruneBuckets    Op = "prune_buckets" // protocol 3, see opProtocol
	OpLiftPauses      Op = "lift_pauses"   // protocol 4 (ProtocolPauses), see pause_lift.go
)

// Entry is what one Raft log entry carries: the leader's clock reading,
// stamped once, and the commands packed into the entry, applied in order.
type Entry struct {
	Now  int64 `json:"now"`
	Cmds []Cmd `json:"cmds"`
}

// Cmd is one command: Op says which of the argument fields is set.
type Cmd struct {
	Op              Op               `json:"op"`
	Submit          *Submit          `json:"submit,omitempty"`
	Claim           *Claim           `json:"claim,omitempty"`
	Heartbeat       *Heartbeat       `json:"hb,omitempty"`
	WorkerHeartbeat *WorkerHeartbeat `json:"whb,omitempty"`
	Report          *Report          `json:"report,omitempty"`
	Expire          *Expire          `json:"expire,omitempty"`
	Register        *Register        `json:"register,omitempty"`
	Cancel          *Cancel          `json:"cancel,omitempty"`
	Retry           *Retry           `json:"retry,omitempty"`
	Node            *store.Node      `json:"node,omitempty"`
	Queue           *PauseQueue      `json:"queue,omitempty"`
	Delete          *Delete          `json:"delete,omitempty"`
	PutSchedule     *PutSchedule     `json:"put_sched,omitempty"`
	DeleteSchedule  *DeleteSchedule  `json:"del_sched,omitempty"`
	PauseSchedule   *PauseSchedule   `json:"pause_sched,omitempty"`
	Fire            *Fire            `json:"fire,omitempty"`
	SubmitGang      *SubmitGang      `json:"submit_gang,omitempty"`
	ReserveGang     *ReserveGang     `json:"reserve_gang,omitempty"`
	Gang            *GangRef         `json:"gang,omitempty"` // unreserve_gang, force_drain
	WorkerOffline   *WorkerOffline   `json:"offline,omitempty"`
	Preempted       *Preempted       `json:"preempted,omitempty"`
	Checkpoint      *Checkpoint      `json:"ckpt,omitempty"`
	ForgetWorker    *ForgetWorker    `json:"forget,omitempty"`
	QueueLimits     *SetQueueLimits  `json:"qlimits,omitempty"`
	PruneBuckets    *PruneBuckets    `json:"prune,omitempty"`
	ContinueCascade *ContinueCascade `json:"cont_cascade,omitempty"` // ProtocolCascade
	LiftPauses      *LiftPauses      `json:"lift,omitempty"`
	BulkStart       *BulkStart       `json:"bulk_start,omitempty"` // ProtocolBulk
	BulkStep        *BulkStep        `json:"bulk_step,omitempty"`  // ProtocolBulk
	BulkStop        *BulkStop        `json:"bulk_stop,omitempty"`  // ProtocolBulk
	RecordStep      *RecordStep      `json:"step,omitempty"`       // ProtocolSteps, steps.go
	SleepStep       *SleepStep       `json:"sleep,omitempty"`      // ProtocolDurable, durable.go
	WaitStep        *WaitStep        `json:"wait,omitempty"`       // ProtocolDurable
	InvokeStep      *InvokeStep      `json:"invoke,omitempty"`     // ProtocolDurable
	SendEvent       *SendEvent       `json:"event,omitempty"`      // ProtocolDurable
}

// Submit creates jobs, all or none. A DependsOn entry "$N" names the N-th job
// of the same command.
type Submit struct {
	Jobs []NewJob `json:"jobs"`
}

// NewJob is one job to create. ID is normally empty (the FSM numbers jobs);
// RunAt 0 means now. Durations are nanoseconds.
type NewJob struct {
	ID             string            `json:"id,omitempty"`
	Command        string            `json:"cmd,omitempty"`
	Type           string            `json:"type,omitempty"`
	Payload        json.RawMessage   `json:"payload,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	Metadata       map[string]string `json:"meta,omitempty"`
	Queue          string            `json:"q,omitempty"`
	Priority       int               `json:"prio,omitempty"`
	DependsOn      []string          `json:"deps,omitempty"`
	MaxAttempts    int               `json:"max_att,omitempty"`
	IdempotencyKey string            `json:"idem,omitempty"`
	Timeout        int64             `json:"timeout,omitempty"`
	Backoff        store.Backoff     `json:"backoff"`
	RunAt          int64             `json:"run_at,omitempty"`
	Retention      int64             `json:"retention,omitempty"`
	UniqueFor      int64             `json:"unique_for,omitempty"`
	Schedule       string            `json:"sched,omitempty"`     // set by Fire only
	ScheduledFor   int64             `json:"sched_for,omitempty"` // set by Fire only
	Resources      store.Resources   `json:"res,omitzero"`
	Tags           []string          `json:"tags,omitempty"`
	// ConcurrencyKey (ProtocolFlow) groups the job for its queue's per-key
	// limits; only a plain submit carries one (see flow.go).
	ConcurrencyKey string `json:"ckey,omitempty"`
	// TraceParent (ProtocolTrace) is the W3C traceparent of the job's
	// trace, which its attempts' spans join; a plain submit carries one,
	// and a gang's template, which every task then keeps (a fire carries
	// its own, Fire.TraceParent). It is data only: no rule reads it.
	TraceParent string `json:"trace,omitempty"`
}

// Delete removes finished jobs whose retention has run out at the entry's
// time; ids that do not qualify (any more) are skipped. KeepFailed
// (ProtocolKeepFailed, written under the op name deleteKept, retention.go)
// is the least time, in nanoseconds, a failed or cancelled job is kept
// after it finished; 0 or less sets no floor.
type Delete struct {
	IDs        []string `json:"ids"`
	KeepFailed int64    `json:"keep_failed,omitempty"`
}

// Claim leases up to Max ready jobs to a worker. LeaseTTL is nanoseconds.
//
// The fields of ProtocolFence: Token names the caller's token (empty with
// auth off), which alone may then report on the attempts; Fenced marks a
// claim that handed its worker the lease (POST /jobs/claim), so that a
// report or heartbeat without the lease is refused; Seq is the worker's
// number for this claim request (0: none), which its later heartbeats use
// to give back an attempt whose reply never reached it.
type Claim struct {
	WorkerID string   `json:"worker"`
	Queues   []string `json:"queues,omitempty"`
	Types    []string `json:"types,omitempty"`
	Shell    bool     `json:"shell,omitempty"`
	Max      int      `json:"max,omitempty"`
	LeaseTTL int64    `json:"ttl"`
	Token    string   `json:"token,omitempty"`
	Fenced   bool     `json:"fenced,omitempty"`
	Seq      uint64   `json:"seq,omitempty"`
	// Fair (ProtocolFair) takes a queue's keyed jobs in turns over its
	// keys (fair.go) rather than by priority alone; a claim without it
	// picks as protocol 2 did, so that every node of a cluster being
	// upgraded applies it alike.
	Fair bool `json:"fair,omitempty"`
	// MaxWorkers (ProtocolWorkerCap; 0: none) is the cap on the token's
	// active worker ids (workercap.go): a claim that would make one more
	// active beyond it is refused with a *TooManyWorkersError.
	MaxWorkers int `json:"max_workers,omitempty"`
	// Ack (ProtocolAck, op code opClaimAck) makes each attempt it starts
	// wait for its worker's acknowledgement: one whose lease runs out
	// first goes back to pending without counting (ack.go).
	Ack bool `json:"ack,omitempty"`
	// MaxBytes (ProtocolClaimBytes; 0: none) is the claim's byte budget:
	// it takes no more jobs once those it took reach MaxBytes, as
	// claimBytes counts them, and always at least one (claim_bytes.go).
	MaxBytes int64 `json:"max_bytes,omitempty"`
}

// Heartbeat renews one job's lease; Lease 0 means the current attempt.
// Token is the caller's token name (ProtocolFence; empty with auth off).
// Progress (nil: none; ProtocolProgress, op code opHeartbeatProgress) is
// the attempt's latest progress, which the job keeps, as a worker
// heartbeat's.
type Heartbeat struct {
	JobID    string         `json:"job"`
	Lease    uint64         `json:"lease,omitempty"`
	LeaseTTL int64          `json:"ttl"`
	Token    string         `json:"token,omitempty"`
	Progress *LeaseProgress `json:"progress,omitempty"`
}

// WorkerHeartbeat marks a worker alive and renews its leases: those in
// Leases when Listed is set, else every lease it holds.
//
// The fields of ProtocolFence: Token is the caller's token name (empty
// with auth off). ClaimsFrom and ClaimsTo (0: none) are the range of claim
// numbers (Claim.Seq) of the worker's requests that had ended when it sent
// the heartbeat: an attempt claimed by one of them and not in a Listed
// heartbeat's Leases never reached the worker, and is given back at once.
type WorkerHeartbeat struct {
	WorkerID   string     `json:"worker"`
	LeaseTTL   int64      `json:"ttl"`
	Listed     bool       `json:"listed,omitempty"`
	Leases     []LeaseRef `json:"leases,omitempty"`
	Token      string     `json:"token,omitempty"`
	ClaimsFrom uint64     `json:"claims_from,omitempty"`
	ClaimsTo   uint64     `json:"claims_to,omitempty"`
}

// LeaseRef names one attempt: a job and its lease. Progress (nil: none,
// ProtocolProgress) is the attempt's latest progress, which a worker
// heartbeat stores with the job.
type LeaseRef struct {
	JobID    string         `json:"job"`
	Lease    uint64         `json:"lease"`
	Progress *LeaseProgress `json:"progress,omitempty"`
}

// Report ends an attempt. Lease 0 means the current attempt, which only an
// attempt claimed without a lease accepts (see Claim.Fenced). Final skips the
// remaining retries. Draw is the leader's random number in [0,1) for jitter.
type Report struct {
	JobID    string  `json:"job"`
	Lease    uint64  `json:"lease,omitempty"`
	Success  bool    `json:"ok,omitempty"`
	ExitCode *int    `json:"exit,omitempty"`
	Output   string  `json:"out,omitempty"`
	Error    string  `json:"err,omitempty"`
	Final    bool    `json:"final,omitempty"`
	Draw     float64 `json:"draw,omitempty"`
	Token    string  `json:"token,omitempty"` // the caller's token name (ProtocolFence)
	// RateLimitedFor and SnoozeFor (ProtocolBackpressure, nanoseconds, at
	// most MaxPause, one at most, on a failure only) end the attempt
	// without counting it: rate-limited pauses the job's concurrency key
	// (or its queue, with no key) for that long and makes the job pending
	// again; a snooze makes it pending that long from now. See pause.go.
	RateLimitedFor int64 `json:"rl_for,omitempty"`
	SnoozeFor      int64 `json:"snooze_for,omitempty"`
	// Result (nil: none; ProtocolProgress) is the JSON the attempt returned,
	// at most MaxResultBytes: it replaces the job's result. Progress (nil:
	// none; ProtocolProgress) is the attempt's last progress, which no
	// heartbeat carried: the job keeps it.
	Result   json.RawMessage `json:"result,omitempty"`
	Progress *LeaseProgress  `json:"progress,omitempty"`
	// Chunked (ProtocolCascade, op code opReportChunked) makes the
	// cascade of a failure go in chunks (cascade.go).
	Chunked bool `json:"chunked,omitempty"`
	// Capped (ProtocolPauses, op code opReportCapped) puts RateLimitedFor
	// and SnoozeFor under the bounds of issue #28: a pause of the job's key
	// only (of its queue only where the queue allows it), at most the
	// queue's max_pause, and hold-offs past MaxHoldOffs in a row counted as
	// attempts. See pause.go.
	Capped bool `json:"capped,omitempty"`
}

// Expire ends an attempt whose lease ran out, if it is still that attempt
// and its deadline has passed at the entry's time.
type Expire struct {
	JobID string  `json:"job"`
	Lease uint64  `json:"lease"`
	Draw  float64 `json:"draw,omitempty"`
	// Chunked (ProtocolCascade, op code opExpireChunked) makes the cascade
	// of a failure go in chunks (cascade.go).
	Chunked bool `json:"chunked,omitempty"`
}

// Register records (or refreshes) a worker. Token is the caller's token
// name (ProtocolFence; empty with auth off): the worker id is then that
// token's while the worker is active.
//
// MaxWorkers (ProtocolWorkerCap; 0: none) is the cap on the token's active
// worker ids (workercap.go): registering one more beyond it is refused
// with a *TooManyWorkersError.
type Register struct {
	Worker     store.Worker `json:"worker"`
	Token      string       `json:"token,omitempty"`
	MaxWorkers int          `json:"max_workers,omitempty"`
}

// Cancel stops a job; Cascade cancels its blocked dependents too.
type Cancel struct {
	JobID   string `json:"job"`
	Cascade bool   `json:"cascade,omitempty"`
}

// Retry re-queues a failed or cancelled job with a fresh attempt budget.
// Dependents also revives the dependents that its failure or cancellation
// ended (see reviveDependents); it is only proposed with op
// OpRetryDependents (protocol 2, see opProtocol), so that a node too old to
// know it stops at the entry instead of applying the plain retry and
// diverging, and the leader proposes it only once every member runs
// protocol 2.
type Retry struct {
	JobID      string `json:"job"`
	Dependents bool   `json:"deps,omitempty"`
}

// PauseQueue pauses or resumes claims from a queue.
type PauseQueue struct {
	Name   string `json:"name"`
	Paused bool   `json:"paused"`
}

// valid reports whether c's op is known (to this binary's protocol) and
// has its argument: Decode refuses, and Encode does not write, a command
// that is not.
func (c *Cmd) valid() bool {
	if c.Protocol() > ProtocolVersion {
		return false
	}
	switch c.Op {
	case OpSubmit:
		return c.Submit != nil
	case OpClaim:
		return c.Claim != nil
	case OpHeartbeat:
		return c.Heartbeat != nil
	case OpWorkerHeartbeat:
		return c.WorkerHeartbeat != nil
	case OpReport:
		return c.Report != nil
	case OpExpire:
		return c.Expire != nil
	case OpRegister:
		return c.Register != nil
	case OpCancel, OpCancelChunked:
		return c.Cancel != nil
	case OpContinueCascade:
		return c.ContinueCascade != nil
	case OpRetryDependentsChunked:
		return c.Retry != nil && c.Retry.Dependents
	case OpRetry:
		return c.Retry != nil && !c.Retry.Dependents
	case OpRetryDependents:
		return c.Retry != nil && c.Retry.Dependents
	case OpSetNode:
		return c.Node != nil
	case OpRemoveNode:
		return c.Node != nil
	case OpPauseQueue:
		return c.Queue != nil
	case OpDelete:
		return c.Delete != nil
	case OpPutSchedule:
		return c.PutSchedule != nil
	case OpDeleteSchedule:
		return c.DeleteSchedule != nil
	case OpPauseSchedule:
		return c.PauseSchedule != nil
	case OpFire:
		return c.Fire != nil
	case OpSubmitGang:
		return c.SubmitGang != nil
	case OpReserveGang:
		return c.ReserveGang != nil
	case OpUnreserveGang, OpForceDrain, OpForceDrainChunked:
		return c.Gang != nil
	case OpWorkerOffline, OpWorkerOfflineChunked:
		return c.WorkerOffline != nil
	case OpPreempted:
		return c.Preempted != nil
	case OpCheckpoint:
		return c.Checkpoint != nil
	case OpForgetWorker:
		return c.ForgetWorker != nil
	case OpSetQueueLimits:
		return c.QueueLimits != nil
	case OpPruneBuckets:
		return c.PruneBuckets != nil
	case OpLiftPauses:
		return c.LiftPauses != nil
	case OpBulkStart:
		return c.BulkStart != nil
	case OpBulkStep:
		return c.BulkStep != nil
	case OpBulkStop:
		return c.BulkStop != nil
	case OpRecordStep:
		return c.RecordStep != nil
	case OpSleepStep:
		return c.SleepStep != nil
	case OpWaitStep:
		return c.WaitStep != nil
	case OpInvokeStep:
		return c.InvokeStep != nil
	case OpSendEvent:
		return c.SendEvent != nil
	}
	return false
}

// SubmitGang creates a gang of Size tasks from one job template, all blocked
// until the leader places the gang. An IdempotencyKey names the gang: a
// submit whose key is held by a task of a gang returns that gang. A
// template's TraceParent (ProtocolTrace, op name submit_gang_traced) is
// every task's: the gang is one trace.
type SubmitGang struct {
	Size int    `json:"size"`
	Job  NewJob `json:"job"`
}

// ReserveGang places a blocked gang: task i is reserved for Workers[i]. It
// applies only if the gang is still blocked at Epoch (the epoch the leader
// saw), is due, and every worker is registered and has room for its task
// beside what its running and reserved jobs hold, and the tags. All N tasks
// are reserved, or none. Whether a worker is alive is the leader's
// judgement (idle workers poll without writing to the log); a reservation
// on a worker that does not claim rolls back after a timeout.
type ReserveGang struct {
	GangID  string   `json:"gang"`
	Epoch   uint64   `json:"epoch"`
	Workers []string `json:"workers"`
}

// GangRef names one reservation or drain of a gang: UnreserveGang rolls a
// reservation back (its tasks were not all claimed in time), ForceDrain ends
// a drain whose tasks did not all acknowledge in time. Either changes nothing
// once the gang has moved past Epoch.
type GangRef struct {
	GangID string `json:"gang"`
	Epoch  uint64 `json:"epoch"`
}

// WorkerOffline declares a silent worker offline: its leases end as expired
// and its reservations roll back. It applies only if the worker was not heard
// from after SeenAt (its last heartbeat as the leader saw it). Draw is the
// leader's jitter draw for the retries it causes.
type WorkerOffline struct {
	WorkerID string  `json:"worker"`
	SeenAt   int64   `json:"seen"`
	Draw     float64 `json:"draw,omitempty"`
}

// Preempted acknowledges that a gang task stopped for the drain of Epoch.
type Preempted struct {
	JobID string `json:"job"`
	Epoch uint64 `json:"epoch"`
	Token string `json:"token,omitempty"` // the caller's token name (ProtocolFence)
}

// Checkpoint keeps Data as a gang task's checkpoint, replacing any older
// one, while its drain of Epoch waits for it. The task's next attempt gets it.
type Checkpoint struct {
	JobID string `json:"job"`
	Epoch uint64 `json:"epoch"`
	Data  []byte `json:"data"`
	Token string `json:"token,omitempty"` // the caller's token name (ProtocolFence)
}

// ForgetWorker removes a worker's record, for a worker gone for good (DELETE
// /workers/{id}, or the leader's pass over long-silent workers). It applies
// only if the worker was not heard from after SeenAt (its last heartbeat as
// the proposer saw it) and holds no lease or reservation; otherwise it is
// ErrConflict, and an unknown worker ErrWorkerNotFound. A forgotten worker
// that comes back registers (or claims) as a new one.
type ForgetWorker struct {
	WorkerID string `json:"worker"`
	SeenAt   int64  `json:"seen"`
}
