package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
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

// MaxStepNames is the most distinct step names (of steps, sleeps, waits
// and invokes) one attempt may use: the cluster's bound on a journal's
// steps (fsm.MaxStepsPerJob), which no attempt could record more of. A
// step past it gets an error wrapping ErrTooManyStepNames.
const MaxStepNames = 10_000

// journal is a running attempt's view of its job's journal.
type journal struct {
	client *client.Client
	jobID  string
	lease  uint64
	onPark func() // called once when the attempt parks; nil: nothing
	parked atomic.Bool

	mu       sync.Mutex
	seen     map[string]int       // occurrences of each name this attempt
	recorded map[string]string    // key -> status, of the claim's listing
	complete bool                 // recorded is all of the journal
	listed   map[string]wire.Step // key -> step as listed, without result unless withResults (journallist.go)
	// withResults: listed holds every step with its result (journallist.go).
	withResults bool
}

// newJournal is the journal of a claimed job as its claim reply gave it.
func newJournal(c *client.Client, job *wire.Job) *journal {
	j := &journal{client: c, jobID: job.ID, lease: job.Lease, seen: map[string]int{}, recorded: map[string]string{}, complete: true,
		listed: map[string]wire.Step{}}
	if jr := job.Journal; jr != nil {
		for _, st := range jr.Steps {
			j.recorded[st.Key] = st.Status
			j.listed[st.Key] = st
		}
		j.complete = !jr.Truncated && len(jr.Steps) == jr.Count
	}
	return j
}

// next is the key of name's next occurrence in this attempt: name, then
// name#2, name#3...; and whether the journal may hold it. A new name past
// MaxStepNames is an error wrapping ErrTooManyStepNames.
func (j *journal) next(name string) (key string, maybeRecorded bool, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.seen[name]; !ok && len(j.seen) >= MaxStepNames {
		return "", false, fmt.Errorf("step %s: %w", name, ErrTooManyStepNames)
	}
	j.seen[name]++
	key = name
	if n := j.seen[name]; n > 1 {
		key = name + "#" + strconv.Itoa(n)
	}
	_, ok := j.recorded[key]
	return key, ok || !j.complete, nil
}

// lookup is the key of name's next occurrence in this attempt and, when
// the journal holds it, the recorded step with its result (nil: not
// recorded, the caller runs it and records it under key).
func (j *journal) lookup(ctx context.Context, name string) (key string, rec *wire.Step, err error) {
	if err := j.readListing(ctx); err != nil {
		return "", nil, err
	}
	key, maybe, err := j.next(name)
	if err != nil {
		return "", nil, err
	}
	if !maybe {
		return key, nil, nil
	}
	if st := j.listedStep(key); st != nil {
		return key, st, nil
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
// the step again. Step is StepWith with StepOptions{Attempts: 1,
// RetryJob: true}. A Job not given by a Worker (a test's) has no journal:
// Step runs fn and returns its result.
func (jb *Job) Step(ctx context.Context, name string, fn StepFunc) (json.RawMessage, error) {
	return jb.StepWith(ctx, name, StepOptions{Attempts: 1, RetryJob: true}, fn)
}

// StepOptions are a step's own retries, inside one attempt of the job.
type StepOptions struct {
	// Attempts is how many times fn is tried before the step fails
	// (0: 1; at most MaxStepAttempts). An error wrapped with NoRetry ends
	// the tries at once.
	Attempts int
	// Backoff is the pause after the first failed try, doubled after each
	// next one up to MaxBackoff (0: none). The attempt keeps its slot
	// while it waits: use Sleep for long waits.
	Backoff time.Duration
	// MaxBackoff caps the pause (0: one minute).
	MaxBackoff time.Duration
	// RetryJob says what the last failure does. false (the default):
	// the step is recorded failed, with the tries it took, and StepWith
	// returns a *StepFailedError wrapped with NoRetry, in this attempt and
	// every later one. true: nothing is recorded and the error is returned
	// as it is, so the job's attempt fails and the job's next attempt (if
	// its max_retries allow one) runs the step again. An error wrapped
	// with NoRetry is recorded failed either way.
	RetryJob bool
}

// MaxStepAttempts is the most tries StepOptions.Attempts may ask for.
const MaxStepAttempts = 1000

// defaultStepMaxBackoff caps a step's pause when StepOptions leave it 0.
const defaultStepMaxBackoff = time.Minute

// StepWith is Step with its own retries: fn is tried up to opt.Attempts
// times, pausing opt.Backoff (doubling) between tries, all within this
// attempt of the job and under one step key; the step is recorded with
// the number of tries it took. What its last failure does is
// opt.RetryJob's to say. A recorded step is returned without running fn,
// as Step does. ctx ending during a pause returns ctx's error, nothing
// recorded.
func (jb *Job) StepWith(ctx context.Context, name string, opt StepOptions, fn StepFunc) (json.RawMessage, error) {
	if opt.Attempts < 0 || opt.Attempts > MaxStepAttempts {
		return nil, fmt.Errorf("step %s: attempts %d: %w", name, opt.Attempts, ErrStepOptions)
	}
	if opt.Backoff < 0 || opt.MaxBackoff < 0 {
		return nil, fmt.Errorf("step %s: a negative backoff: %w", name, ErrStepOptions)
	}
	j := jb.journal
	if j == nil {
		v, _, err := tryStep(ctx, opt, fn)
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
	v, tries, ferr := tryStep(ctx, opt, fn)
	req := wire.StepRequest{Attempts: tries, DurationMillis: time.Since(began).Milliseconds()}
	var nr *noRetryError
	switch {
	case ferr == nil:
		res, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("step %s: encode its result: %w", key, err)
		}
		req.Result = res
	case ctx.Err() != nil && !errors.As(ferr, &nr), opt.RetryJob && !errors.As(ferr, &nr):
		return nil, ferr
	default:
		msg, _ := json.Marshal(ferr.Error())
		req.Status, req.Result = wire.StepFailed, msg
	}
	st, err := j.record(ctx, key, req)
	span.recorded(st)
	if err != nil {
		return nil, err
	}
	return stepOutcome(st)
}

// tryStep calls fn until it succeeds, returns an error wrapped with
// NoRetry, has been tried opt.Attempts times, or ctx ends in a pause; it
// returns the last result or error and how many tries it made.
func tryStep(ctx context.Context, opt StepOptions, fn StepFunc) (any, int, error) {
	attempts := max(opt.Attempts, 1)
	hi := opt.MaxBackoff
	if hi == 0 {
		hi = defaultStepMaxBackoff
	}
	pause := min(opt.Backoff, hi)
	for try := 1; ; try++ {
		v, err := fn(ctx)
		var nr *noRetryError
		if err == nil || try >= attempts || errors.As(err, &nr) {
			return v, try, err
		}
		if pause > 0 && !sleep(ctx, pause) {
			return nil, try, fmt.Errorf("%w (after try %d: %w)", context.Cause(ctx), try, err)
		}
		pause = min(2*pause, hi)
	}
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
