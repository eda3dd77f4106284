package fsm

// Bulk actions (issue #30): cancel, retry, delete or set the priority of
// every job a selector matches, applied in chunks across entries so that
// other writes wait at most one chunk.
//
// bulk_start records the action (store/bulk.go) with its cursor above
// every job there is; the leader's bulk loop (leader/bulk.go) walks the
// jobs the selector matches below the cursor, newest first, and proposes
// bulk_step with the ids of a chunk and where the walk goes on. The FSM
// parses no selector: the leader chooses the ids, and each step applies
// only when the record's cursor is still the step's From (a step proposed
// twice, or by a leader that lost its term, changes nothing), only to jobs
// whose seq lies in [Next, From) (so no job is reached twice), and only
// to jobs still of the walked status. Each job goes through the same rule
// as a request for that one job (cancel.go, finish.go's retry,
// retention.go's deleteJob, priority.go), its cascades in chunks
// (cascade.go). bulk_stop ends the action between two steps.

import (
	"errors"

	"github.com/workron/workron/store"
)

// ProtocolBulk is the protocol of bulk actions: the ops bulk_start,
// bulk_step and bulk_stop.
const ProtocolBulk = 4

// The ops of ProtocolBulk.
const (
	OpBulkStart Op = "bulk_start"
	OpBulkStep  Op = "bulk_step"
	OpBulkStop  Op = "bulk_stop"
)

// The actions of a bulk action.
const (
	BulkCancel   = "cancel"
	BulkRetry    = "retry"
	BulkDelete   = "delete"
	BulkPriority = "priority"
)

// Bounds of bulk actions.
const (
	// MaxBulkRunning is the most bulk actions running at once in a
	// cluster; one more is refused with ErrTooManyBulk.
	MaxBulkRunning = 4
	// MaxBulkKept is the most bulk action records kept: a new one deletes
	// the oldest that ended beyond it.
	MaxBulkKept = 100
	// MaxBulkSelector is the longest selector text, in bytes.
	MaxBulkSelector = 4096
	// MaxBulkChunk is the most jobs one bulk_step names, and
	// MaxBulkChunkBytes the most bytes of their ids.
	MaxBulkChunk      = 1000
	MaxBulkChunkBytes = 64 << 10
	// MaxBulkPriority bounds a priority action's priority (±), as the API
	// bounds a job's.
	MaxBulkPriority = 1_000_000
)

// Errors of bulk actions.
var (
	// ErrBulkNotFound means the bulk action does not exist (or its record
	// was dropped, MaxBulkKept).
	ErrBulkNotFound = errors.New("bulk action not found")
	// ErrTooManyBulk means MaxBulkRunning bulk actions are running.
	ErrTooManyBulk = errors.New("too many bulk actions running")
)

// BulkStart creates a bulk action. Status is the status index the leader
// walks ("" for every job), which the selector chose; Selector is its
// text, kept for the leader to compile and for people to read.
type BulkStart struct {
	Action   string       `json:"action"`
	Priority int          `json:"prio,omitempty"`
	Selector string       `json:"sel"`
	Status   store.Status `json:"status,omitempty"`
}

// BulkStep applies bulk action ID to the jobs IDs, which the leader chose
// among those of seq in [Next, From), and moves its cursor from From to
// Next (0: the walk is over).
type BulkStep struct {
	ID   uint64   `json:"id"`
	From uint64   `json:"from"`
	Next uint64   `json:"next"`
	IDs  []string `json:"ids,omitempty"`
}

// BulkStop stops bulk action ID before its next step.
type BulkStop struct {
	ID uint64 `json:"id"`
}

// bulkStart applies bulk_start.
func (a *applier) bulkStart(s *BulkStart) Result {
	switch {
	case s.Action != BulkCancel && s.Action != BulkRetry && s.Action != BulkDelete && s.Action != BulkPriority:
		return Result{Err: &ValidationError{Field: "action", Reason: "must be cancel, retry, delete or priority, got " + s.Action}}
	case len(s.Selector) > MaxBulkSelector:
		return Result{Err: &ValidationError{Field: "filter", Reason: "longer than 4096 bytes"}}
	case s.Status != "" && !s.Status.Valid():
		return Result{Err: &ValidationError{Field: "status", Reason: string(s.Status) + " is not a status"}}
	case s.Priority > MaxBulkPriority || s.Priority < -MaxBulkPriority:
		return Result{Err: &ValidationError{Field: "priority", Reason: "must be within ±1000000"}}
	}
	all, err := a.tx.Bulks()
	a.must(err)
	running := 0
	for _, b := range all {
		if b.State == store.BulkRunning {
			running++
		}
	}
	if running >= MaxBulkRunning {
		return Result{Err: ErrTooManyBulk}
	}
	kept := len(all)
	for _, b := range all { // the oldest that ended make room
		if kept < MaxBulkKept {
			break
		}
		if b.State != store.BulkRunning {
			a.must(a.tx.DeleteBulk(b.ID))
			kept--
		}
	}
	b := &store.Bulk{Action: s.Action, Priority: s.Priority, Selector: s.Selector, Status: s.Status,
		Cursor: a.tx.LastSeq() + 1, State: store.BulkRunning, Created: a.now, Updated: a.now}
	if s.Action != BulkPriority {
		b.Priority = 0
	}
	a.must(a.tx.NewBulk(b))
	return Result{Bulk: b}
}

// bulkStep applies bulk_step; see the rules at the top of this file.
func (a *applier) bulkStep(s *BulkStep) Result {
	b, err := a.tx.GetBulk(s.ID)
	if errors.Is(err, store.ErrNotFound) {
		return Result{Err: ErrBulkNotFound}
	}
	a.must(err)
	if b.State != store.BulkRunning || b.Cursor != s.From {
		return Result{Bulk: b} // stale: another step or a stop came first
	}
	if len(s.IDs) > MaxBulkChunk || (s.Next != 0 && s.Next >= s.From) {
		return Result{Err: &ValidationError{Field: "ids", Reason: "a step names at most 1000 jobs and moves its cursor down"}}
	}
	size := 0
	for _, id := range s.IDs {
		size += len(id)
	}
	if size > MaxBulkChunkBytes {
		return Result{Err: &ValidationError{Field: "ids", Reason: "a step's ids take at most 64 KiB"}}
	}
	a.chunked = true // cascades of a bulk step go in chunks (cascade.go)
	seen := make(map[string]bool, len(s.IDs))
	for _, id := range s.IDs {
		b.Matched++
		j, err := a.tx.Job(id)
		if err != nil || seen[id] || j.Seq >= s.From || j.Seq < s.Next || (b.Status != "" && j.Status != b.Status) {
			b.Skipped++
			continue
		}
		seen[id] = true
		switch err := a.bulkOne(b, j); {
		case err == nil:
			b.Done++
		case errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound):
			b.Skipped++
		default:
			b.Failed++
			b.LastError = err.Error()
		}
	}
	b.Cursor = s.Next
	if s.Next == 0 {
		b.State = store.BulkDone
	}
	b.Updated = a.now
	a.must(a.tx.PutBulk(b))
	return Result{Bulk: b}
}

// bulkOne applies b's action to j by the rule of that action for one job.
func (a *applier) bulkOne(b *store.Bulk, j *store.Job) error {
	switch b.Action {
	case BulkCancel:
		return a.cancel(&Cancel{JobID: j.ID, Cascade: true}).Err
	case BulkRetry:
		return a.retry(&Retry{JobID: j.ID, Dependents: true}).Err
	case BulkDelete:
		return a.deleteJob(j)
	case BulkPriority:
		return a.setPriority(j, b.Priority)
	}
	return &ValidationError{Field: "action", Reason: b.Action + " is not a bulk action"}
}

// bulkStop applies bulk_stop: a running action is stopped, one that ended
// stays as it is.
func (a *applier) bulkStop(s *BulkStop) Result {
	b, err := a.tx.GetBulk(s.ID)
	if errors.Is(err, store.ErrNotFound) {
		return Result{Err: ErrBulkNotFound}
	}
	a.must(err)
	if b.State == store.BulkRunning {
		b.State, b.Updated = store.BulkStopped, a.now
		a.must(a.tx.PutBulk(b))
	}
	return Result{Bulk: b}
}

// Bulks lists the bulk actions kept, oldest first.
func (f *FSM) Bulks() []*store.Bulk {
	var out []*store.Bulk
	_ = f.view(func(tx *store.Tx) error {
		var err error
		out, err = tx.Bulks()
		return err
	})
	return out
}

// Bulk returns a bulk action, or an error matching ErrBulkNotFound.
func (f *FSM) Bulk(id uint64) (*store.Bulk, error) {
	var b *store.Bulk
	err := f.view(func(tx *store.Tx) error {
		var err error
		b, err = tx.GetBulk(id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrBulkNotFound
	}
	return b, err
}
