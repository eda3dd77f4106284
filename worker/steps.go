package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker/client"
)

// Durable steps (issue #31).
//
// A handler runs the parts of a job that must not run twice as steps:
// job.Step(ctx, "charge", fn). A step whose result the cluster recorded is
// never run again for that job: a later attempt (after a crash, a timeout,
// a worker killed) gets the recorded result back. The record is committed
// through Raft before Step returns, under the attempt's lease, so an
// attempt that lost its lease cannot record.

// StepFunc is a step's work: its result is encoded as JSON (a
// json.RawMessage as it is) and recorded.
type StepFunc func(ctx context.Context) (any, error)

// StepFailedError is what Step returns for a step recorded as failed for
// good (its function returned an error wrapped with NoRetry): a later
// attempt gets it back without running the step. It is itself wrapped
// with NoRetry, so a handler that returns it fails the job for good.
type StepFailedError struct {
	Step    string // the step key
	Message string // the error the step returned
}

func (e *StepFailedError) Error() string {
	return fmt.Sprintf("step %s failed: %s", e.Step, e.Message)
}

// journal is a running attempt's view of its job's journal.
type journal struct {
	client *client.Client
	jobID  string
	lease  uint64

	mu       sync.Mutex
	seen     map[string]int    // occurrences of each name this attempt
	recorded map[string]string // key -> status, of the claim's listing
	complete bool              // recorded is all of the journal
}

// newJournal is the journal of a claimed job as its claim reply gave it.
func newJournal(c *client.Client, job *wire.Job) *journal {
	j := &journal{client: c, jobID: job.ID, lease: job.Lease, seen: map[string]int{}, recorded: map[string]string{}, complete: true}
	if jr := job.Journal; jr != nil {
		for _, st := range jr.Steps {
			j.recorded[st.Key] = st.Status
		}
		j.complete = !jr.Truncated && len(jr.Steps) == jr.Count
	}
	return j
}

// next is the key of name's next occurrence in this attempt: name, then
// name#2, name#3...; and whether the journal may hold it.
func (j *journal) next(name string) (key string, maybeRecorded bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.seen[name]++
	key = name
	if n := j.seen[name]; n > 1 {
		key = name + "#" + strconv.Itoa(n)
	}
	_, ok := j.recorded[key]
	return key, ok || !j.complete
}

// lookup is the key of name's next occurrence in this attempt and, when
// the journal holds it, the recorded step with its result (nil: not
// recorded, the caller runs it and records it under key).
func (j *journal) lookup(ctx context.Context, name string) (key string, rec *wire.Step, err error) {
	key, maybe := j.next(name)
	if !maybe {
		return key, nil, nil
	}
	st, err := j.client.Step(ctx, j.jobID, key)
	switch {
	case err == nil:
		return key, st, nil
	case client.IsNotFound(err):
		return key, nil, nil
	}
	return key, nil, fmt.Errorf("read step %s: %w", key, err)
}

// record records step key under the attempt's lease (req's Lease is
// set here) and returns the step as the journal keeps it: this record, or
// the one another attempt recorded first.
func (j *journal) record(ctx context.Context, key string, req wire.StepRequest) (*wire.Step, error) {
	req.Lease = j.lease
	st, _, err := j.client.RecordStep(ctx, j.jobID, key, req)
	if err != nil {
		return nil, fmt.Errorf("record step %s: %w", key, err)
	}
	return st, nil
}

// Step runs fn as step name of the job's journal, or returns what an
// earlier attempt recorded for it without running it. The n-th Step of
// one name in an attempt is step "name#n" (the first is "name"), so a
// step in a loop gets a key per turn. On success the result is recorded
// (committed through Raft) before Step returns it, as JSON; if another
// attempt recorded the step first, its result is returned instead.
//
// When fn returns an error wrapped with NoRetry, the step is recorded as
// failed and Step returns a *StepFailedError (wrapped with NoRetry), as it
// does in every later attempt; any other error is returned as it is and
// nothing is recorded: the attempt fails as today, and a later one runs
// the step again. A Job not given by a Worker (a test's) has no journal:
// Step runs fn and returns its result.
func (jb *Job) Step(ctx context.Context, name string, fn StepFunc) (json.RawMessage, error) {
	j := jb.journal
	if j == nil {
		v, err := fn(ctx)
		if err != nil {
			return nil, err
		}
		return json.Marshal(v)
	}
	ctx, span := traceStep(ctx, name, stepKindRun, &fn) // steptrace.go: the step's span
	defer span.end()
	key, rec, err := j.lookup(ctx, name)
	span.lookedUp(key, rec)
	switch {
	case err != nil:
		return nil, err
	case rec != nil:
		return stepOutcome(rec)
	}
	began := time.Now()
	v, ferr := fn(ctx)
	req := wire.StepRequest{Attempts: 1, DurationMillis: time.Since(began).Milliseconds()}
	var nr *noRetryError
	switch {
	case ferr == nil:
		res, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("step %s: encode its result: %w", key, err)
		}
		req.Result = res
	case errors.As(ferr, &nr):
		msg, _ := json.Marshal(ferr.Error())
		req.Status, req.Result = wire.StepFailed, msg
	default:
		return nil, ferr
	}
	st, err := j.record(ctx, key, req)
	span.recorded(st)
	if err != nil {
		return nil, err
	}
	return stepOutcome(st)
}

// stepOutcome is what Step returns for a recorded step.
func stepOutcome(st *wire.Step) (json.RawMessage, error) {
	if st.Status != wire.StepFailed {
		return st.Result, nil
	}
	var msg string
	if err := json.Unmarshal(st.Result, &msg); err != nil {
		msg = string(st.Result)
	}
	return nil, NoRetry(&StepFailedError{Step: st.Key, Message: msg})
}

// StepAs is Job.Step for a step whose result is a T: it decodes the
// recorded JSON into a T.
func StepAs[T any](ctx context.Context, job *Job, name string, fn func(ctx context.Context) (T, error)) (T, error) {
	var out T
	raw, err := job.Step(ctx, name, func(ctx context.Context) (any, error) { return fn(ctx) })
	if err != nil {
		return out, err
	}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			return out, fmt.Errorf("step %s: decode its result: %w", name, err)
		}
	}
	return out, nil
}
