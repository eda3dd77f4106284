package fsm

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/workron/workron/store"
)

// Durable steps (issue #31, ProtocolSteps).
//
// A running attempt records a step of its job's journal with op
// record_step (RecordStep): one fenced write under the attempt's lease,
// like a report's, so that a stale attempt cannot record. A step is
// recorded once: a second record of the same key is refused with
// ErrStepRecorded and the Result carries the step recorded first, so the
// caller uses that one. Each apply writes two keys and reads one step and
// the journal's totals: it is bounded by MaxStepResultBytes whatever the
// journal holds. The journal lives in the store's steps bucket
// (store/steps.go) and goes with its job (store.Tx.DeleteJob).

// ProtocolSteps is the protocol of op record_step.
const ProtocolSteps = 4

// OpRecordStep records one step of a running attempt's journal.
const OpRecordStep Op = "record_step"

// Bounds of a journal. The API refuses more with the same errors.
const (
	// MaxStepsPerJob is the most steps a job's journal records.
	MaxStepsPerJob = 10_000
	// MaxStepResultBytes is the largest result of one step, in bytes.
	MaxStepResultBytes = 256 << 10
	// MaxJournalBytes is the most bytes a job's journal holds: its steps'
	// keys and results.
	MaxJournalBytes = 16 << 20
	// MaxStepKeyBytes is the longest step key (name and occurrence).
	MaxStepKeyBytes = 200
	// MaxStepAttempts bounds a step's Attempts.
	MaxStepAttempts = 1_000_000
)

// maxDeleteStepKeys is the most journal steps one retention delete removes
// with their jobs (retention.go), and one bulk delete step as the leader
// cuts it (MaxDeleteStepKeys); a var so that tests can lower it.
var maxDeleteStepKeys = 100_000

// MaxDeleteStepKeys is the most journal steps one entry that deletes jobs
// should remove with them: a journal is deleted key by key, so the leader
// cuts a bulk delete's steps at this many (leader/bulk.go).
func MaxDeleteStepKeys() int { return maxDeleteStepKeys }

// Errors of steps.
var (
	// ErrStepRecorded means the step was recorded already; the Result's
	// Step is the one recorded.
	ErrStepRecorded = errors.New("step already recorded")
	// ErrJournalFull means recording the step would pass a bound of the
	// journal (JournalFullError says which).
	ErrJournalFull = errors.New("journal full")
)

// JournalFullError says which bound of a journal a record would pass.
type JournalFullError struct {
	JobID string
	Limit string // "max_steps_per_job" or "max_journal_bytes"
	Have  int64
	Max   int64
}

func (e *JournalFullError) Error() string {
	return fmt.Sprintf("job %s: the journal holds %d of %s = %d: the step was not recorded", e.JobID, e.Have, e.Limit, e.Max)
}

func (e *JournalFullError) Unwrap() error { return ErrJournalFull }

// RecordStep records step Key of job JobID's attempt Lease (required).
// Token is the caller's token name (empty with auth off). Failed records
// a step that failed for good; Result is what it returned (any bytes, at
// most MaxStepResultBytes). Attempts (at least 1) and Duration
// (nanoseconds) are what the recorder says of it.
type RecordStep struct {
	JobID    string `json:"job"`
	Lease    uint64 `json:"lease"`
	Token    string `json:"token,omitempty"`
	Key      string `json:"key"`
	Failed   bool   `json:"failed,omitempty"`
	Result   []byte `json:"result,omitempty"`
	Attempts int    `json:"attempts,omitempty"`
	Duration int64  `json:"dur,omitempty"`
}

// CheckStepKey refuses a step key the journal does not take: empty, longer
// than MaxStepKeyBytes, not UTF-8, or with a control character or '/'.
func CheckStepKey(key string) error {
	switch {
	case key == "":
		return &ValidationError{Field: "step", Reason: "must not be empty"}
	case len(key) > MaxStepKeyBytes:
		return &ValidationError{Field: "step", Reason: fmt.Sprintf("is %d bytes, more than the limit of %d", len(key), MaxStepKeyBytes)}
	case !utf8.ValidString(key):
		return &ValidationError{Field: "step", Reason: "is not UTF-8"}
	case strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '/' }):
		return &ValidationError{Field: "step", Reason: "has a control character or '/'"}
	}
	return nil
}

// check refuses a record the journal never takes, whatever it holds.
func (s *RecordStep) check() error {
	if err := CheckStepKey(s.Key); err != nil {
		return err
	}
	switch {
	case s.Lease == 0:
		return fmt.Errorf("recording a step of job %s needs the attempt's lease: %w", s.JobID, ErrLeaseRequired)
	case len(s.Result) > MaxStepResultBytes:
		return &ValidationError{Field: "result", Reason: fmt.Sprintf("is %d bytes, more than max_step_result_bytes = %d", len(s.Result), MaxStepResultBytes)}
	case s.Attempts < 0 || s.Attempts > MaxStepAttempts:
		return &ValidationError{Field: "attempts", Reason: fmt.Sprintf("must be from 0 to %d", MaxStepAttempts)}
	case s.Duration < 0:
		return &ValidationError{Field: "duration", Reason: "must not be negative"}
	}
	return nil
}

// recordStep applies a RecordStep: the attempt must be current and the
// caller's, the step new and the journal within its bounds.
func (a *applier) recordStep(s *RecordStep) Result {
	if err := s.check(); err != nil {
		return Result{Err: err}
	}
	j, err := a.ownAttempt(s.JobID, s.Lease, s.Token)
	if err != nil {
		return Result{Err: err}
	}
	if old, err := a.tx.Step(j.ID, s.Key); err == nil {
		return Result{Err: fmt.Errorf("job %s step %s: %w", j.ID, s.Key, ErrStepRecorded), Jobs: []*store.Job{j}, Step: old}
	} else if !errors.Is(err, store.ErrNotFound) {
		a.must(err)
	}
	tot := a.tx.Journal(j.ID)
	if tot.Steps >= MaxStepsPerJob {
		return Result{Err: &JournalFullError{JobID: j.ID, Limit: "max_steps_per_job", Have: int64(tot.Steps), Max: MaxStepsPerJob}}
	}
	if tot.Bytes+store.StepBytes(s.Key, s.Result) > MaxJournalBytes {
		return Result{Err: &JournalFullError{JobID: j.ID, Limit: "max_journal_bytes", Have: tot.Bytes, Max: MaxJournalBytes}}
	}
	st := &store.Step{Key: s.Key, Status: store.StepOK, Attempts: max(s.Attempts, 1), Attempt: j.Attempts,
		RecordedAt: a.now, Duration: s.Duration, Size: len(s.Result), Result: s.Result}
	if s.Failed {
		st.Status = store.StepFailed
	}
	a.must(a.tx.PutStep(j.ID, st))
	return Result{Jobs: []*store.Job{j}, Step: st}
}

// Journal returns the totals of a job's journal, or an error matching
// ErrNotFound when there is no such job.
func (f *FSM) Journal(jobID string) (store.JournalTotals, error) {
	var tot store.JournalTotals
	err := f.view(func(tx *store.Tx) error {
		if !tx.HasJob(jobID) {
			return fmt.Errorf("job %s: %w", jobID, ErrNotFound)
		}
		tot = tx.Journal(jobID)
		return nil
	})
	return tot, err
}

// Steps lists up to limit steps of a job's journal after the step key
// after, in key order, without their results, and the journal's totals;
// an error matching ErrNotFound when there is no such job.
func (f *FSM) Steps(jobID, after string, limit int) ([]*store.Step, store.JournalTotals, error) {
	var (
		out []*store.Step
		tot store.JournalTotals
	)
	err := f.view(func(tx *store.Tx) error {
		if !tx.HasJob(jobID) {
			return fmt.Errorf("job %s: %w", jobID, ErrNotFound)
		}
		tot = tx.Journal(jobID)
		return tx.ForEachStep(jobID, after, false, func(s *store.Step) bool {
			out = append(out, s)
			return len(out) < limit
		})
	})
	return out, tot, err
}

// StepsWithResults lists steps of a job's journal after the step key
// after, in key order, with their results (store.Tx.StepsWithin: at most
// limit steps and maxBytes of results, at least one), whether more
// follow, and the journal's totals, all of one read; an error matching
// ErrNotFound when there is no such job.
func (f *FSM) StepsWithResults(jobID, after string, limit int, maxBytes int64) (steps []*store.Step, more bool, tot store.JournalTotals, err error) {
	err = f.view(func(tx *store.Tx) error {
		if !tx.HasJob(jobID) {
			return fmt.Errorf("job %s: %w", jobID, ErrNotFound)
		}
		tot = tx.Journal(jobID)
		var err error
		steps, more, err = tx.StepsWithin(jobID, after, limit, maxBytes)
		return err
	})
	return steps, more, tot, err
}

// Step returns one recorded step with its result: an error matching
// ErrNotFound when the job or the step is not there.
func (f *FSM) Step(jobID, key string) (*store.Step, error) {
	var s *store.Step
	err := f.view(func(tx *store.Tx) error {
		var err error
		s, err = tx.Step(jobID, key)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("job %s step %s: %w", jobID, key, ErrNotFound)
	}
	return s, err
}
