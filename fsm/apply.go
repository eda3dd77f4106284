package fsm

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/workron/workron/store"
)

// applier applies the commands of one log entry inside the batch's store
// transaction. now is the entry's time (never earlier than a previous
// entry's), index its Raft index.
type applier struct {
	f            *FSM
	tx           *store.Tx
	index        uint64
	now          int64
	readyChanged bool
	// held collects a claim's Result.Held (flow.go's noteHeld).
	held map[string]int64
	// chunked says the command being applied cascades in chunks
	// (cascade.go); cascadeSpent is what the entry's chunks visited.
	chunked      bool
	cascadeSpent int
}

func (a *applier) apply(c *Cmd) Result {
	if err := checkKeys(c); err != nil {
		return Result{Err: err}
	}
	a.chunked = c.chunked()
	switch c.Op {
	case OpSubmit:
		return a.submit(c.Submit)
	case OpClaim:
		a.held = nil
		r := a.claim(c.Claim)
		r.Held = a.held
		return r
	case OpHeartbeat:
		return a.heartbeat(c.Heartbeat)
	case OpWorkerHeartbeat:
		return a.workerHeartbeat(c.WorkerHeartbeat)
	case OpReport:
		return a.report(c.Report)
	case OpExpire:
		return a.expire(c.Expire)
	case OpRegister:
		return a.register(c.Register)
	case OpCancel, OpCancelChunked:
		return a.cancel(c.Cancel)
	case OpContinueCascade:
		return a.continueCascade(c.ContinueCascade)
	case OpRetry, OpRetryDependents, OpRetryDependentsChunked:
		return a.retry(c.Retry)
	case OpSetNode:
		return a.fatal(a.tx.PutNode(c.Node))
	case OpRemoveNode:
		return a.fatal(a.tx.DeleteNode(c.Node.ID))
	case OpPauseQueue:
		return a.pauseQueue(c.Queue)
	case OpDelete:
		return a.deleteJobs(c.Delete)
	case OpPutSchedule:
		return a.putSchedule(c.PutSchedule)
	case OpDeleteSchedule:
		return a.deleteSchedule(c.DeleteSchedule)
	case OpPauseSchedule:
		return a.pauseSchedule(c.PauseSchedule)
	case OpFire:
		return a.fire(c.Fire)
	case OpSubmitGang:
		return a.submitGang(c.SubmitGang)
	case OpReserveGang:
		return a.reserveGang(c.ReserveGang)
	case OpUnreserveGang:
		return a.unreserveGang(c.Gang)
	case OpForceDrain, OpForceDrainChunked:
		return a.forceDrain(c.Gang)
	case OpWorkerOffline, OpWorkerOfflineChunked:
		return a.workerOffline(c.WorkerOffline)
	case OpPreempted:
		return a.preempted(c.Preempted)
	case OpCheckpoint:
		return a.checkpoint(c.Checkpoint)
	case OpForgetWorker:
		return a.forgetWorker(c.ForgetWorker)
	case OpSetQueueLimits:
		return a.setQueueLimits(c.QueueLimits)
	case OpPruneBuckets:
		return a.pruneBuckets(c.PruneBuckets)
	case OpLiftPauses:
		return a.liftPauses(c.LiftPauses)
	case OpBulkStart:
		return a.bulkStart(c.BulkStart)
	case OpBulkStep:
		return a.bulkStep(c.BulkStep)
	case OpBulkStop:
		return a.bulkStop(c.BulkStop)
	case OpRecordStep:
		return a.recordStep(c.RecordStep)
	case OpSleepStep:
		return a.sleepStep(c.SleepStep)
	case OpWaitStep:
		return a.waitStep(c.WaitStep)
	case OpInvokeStep:
		return a.invokeStep(c.InvokeStep)
	case OpSendEvent:
		return a.sendEvent(c.SendEvent)
	}
	// Decode refuses unknown ops, so this is a bug, not input.
	panic(fmt.Sprintf("workron: unknown command %q at index %d", c.Op, a.index))
}

// fatal turns a store error into a panic that ApplyBatch recovers (see
// writeFailure): a write that fails half way would leave this node's state
// different from its peers', so the batch stops there and the node with it.
func (a *applier) fatal(err error) Result {
	if err != nil {
		panic(writeFailure{fmt.Errorf("at log index %d: %w", a.index, err)})
	}
	return Result{}
}

// writeFailure carries a store error out of a batch's transaction, which
// the unwinding rolls back.
type writeFailure struct{ err error }

func (a *applier) must(err error) {
	if err != nil {
		a.fatal(err)
	}
}

// job loads a job, or returns ErrNotFound.
func (a *applier) job(id string) (*store.Job, error) {
	j, err := a.tx.Job(id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	a.must(err)
	return j, nil
}

// unindex takes a job out of the in-memory indexes before it changes.
func (a *applier) unindex(j *store.Job) {
	switch {
	case j.Status == store.StatusPending:
		h := j.Head()
		a.f.idx.removePending(&h)
	case j.Status.Leased():
		a.f.idx.removeLease(j.ID)
	case j.Status == store.StatusReserved:
		a.f.idx.removeReserved(j.ID)
	}
}

// reindex puts a changed job back into the indexes that fit its status.
func (a *applier) reindex(j *store.Job, prev store.Status) {
	a.f.idx.count(j.Queue, prev, j.Status)
	a.capacityFreed(j, prev)
	h := j.Head()
	switch {
	case j.Status == store.StatusPending:
		a.f.idx.addPending(&h, a.now)
		a.readyChanged = true
	case j.Status.Leased():
		a.f.idx.addLease(&h)
	case j.Status == store.StatusReserved:
		a.f.idx.addReserved(&h)
		a.readyChanged = true // its worker's long-poll may take it now
	}
}

// put stores a job that was unindexed while its status was prev.
func (a *applier) put(j *store.Job, prev store.Status) {
	a.expiry(j)
	a.must(a.tx.UpdateJob(j, prev, a.index))
	a.reindex(j, prev)
	a.releaseQueued(j, prev)
	a.noteStop(j)
	if j.Status.Finished() && !prev.Finished() {
		a.durableEnded(j)
	}
}

func (a *applier) insert(j *store.Job) {
	a.must(a.tx.InsertJob(j, a.index))
	a.reindex(j, "")
}

// tail keeps the last max bytes of s, starting on a UTF-8 boundary.
// TrimOutput is what the FSM keeps of a report's output or error: its last
// MaxOutput bytes, starting on a whole UTF-8 character. The API trims
// reports with it before proposing them, so a 32 MiB output costs the log
// 4 KiB, and the job ends the same (trimming twice keeps the same bytes).
func TrimOutput(s string) string { return tail(s, MaxOutput) }

func tail(s string, max int) string {
	if len(s) <= max {
		return s
	}
	s = s[len(s)-max:]
	for i := 0; i < len(s) && i < 4; i++ {
		if s[i]&0xC0 != 0x80 {
			return s[i:]
		}
	}
	return s
}

// maxBackoff bounds a retry delay, so that neither the delay nor now plus the
// delay overflows int64 (a float overflowing int64 converts differently on
// different CPUs, which would break determinism).
const maxBackoff = int64(100 * 365 * 24 * time.Hour)

// backoffDelay is the wait before the retry that follows the given attempt:
// min(base·2^(attempt-1), max), plus up to jitter·that, scaled by draw. Max 0
// means no cap (but never more than maxBackoff).
func backoffDelay(b store.Backoff, attempt int, draw float64) int64 {
	d := b.Base
	for i := 1; i < attempt && (b.Max <= 0 || d < b.Max) && d < maxBackoff; i++ {
		d *= 2
	}
	if b.Max > 0 && d > b.Max {
		d = b.Max
	}
	d = min(d, maxBackoff)
	if draw < 0 || draw >= 1 {
		draw = 0
	}
	jitter := min(max(b.Jitter, 0), 10) // the API allows 0..10; clamp hand-made commands too
	return min(d+int64(min(float64(d)*jitter*draw, float64(maxBackoff))), maxBackoff)
}

// after is t+d held at the int64 limits instead of wrapping around: the
// API bounds every duration it proposes, but a hand-made command with a huge
// one (a lease TTL, a unique_for) must mean "far off", not the distant past.
func after(t, d int64) int64 {
	switch {
	case d > 0 && t > math.MaxInt64-d:
		return math.MaxInt64
	case d < 0 && t < math.MinInt64-d:
		return math.MinInt64
	}
	return t + d
}

func durationString(ns int64) string { return time.Duration(ns).String() }
