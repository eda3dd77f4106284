package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/workron/workron/api/wire"
)

// Durable sleeps, waits and child jobs (issue #31, park-contract.md).
//
// A parking call is a step of the journal, keyed by name and occurrence
// like Step's (in the same per-name count). It asks the cluster to park
// the job on it: when the cluster parks it, the attempt has ended
// (uncharged, like a snooze), the call returns a *ParkedError (wrapping
// ErrParked) and the handler returns it; the worker cancels the
// handler's context with cause ErrParked, frees the slot and sends no
// report. When the job wakes, a new attempt runs the handler from the
// top: its steps replay, and the parking call returns the step's outcome.

// ParkedError is the error of a call that parked the job. It wraps
// ErrParked.
type ParkedError struct {
	Step string // the step key
	Kind string // wire.StepSleep, StepKindWait or StepKindInvoke
}

func (e *ParkedError) Error() string {
	return fmt.Sprintf("job parked on %s step %s", e.Kind, e.Step)
}

func (e *ParkedError) Unwrap() error { return ErrParked }

// ChildFailedError is what Invoke returns for a child job that ended
// failed or cancelled, in this attempt and every later one (it is
// recorded). It is wrapped with NoRetry, so a handler that returns it
// fails the job for good.
type ChildFailedError struct {
	Step    string // the step key
	ChildID string
	Status  string // "failed" or "cancelled"
	Message string // the child's last error
}

func (e *ChildFailedError) Error() string {
	return fmt.Sprintf("step %s: child job %s %s: %s", e.Step, e.ChildID, e.Status, e.Message)
}

// Sleep parks the job for d as step name (d rounds up to a millisecond;
// at most 365 days; 0 or less does not park): the attempt ends with a *ParkedError and the job
// runs again at the wake time, decided once by the cluster; in that
// attempt Sleep returns nil. A Job not given by a Worker returns nil at
// once.
func (jb *Job) Sleep(ctx context.Context, name string, d time.Duration) error {
	ms := ceilMillis(d)
	return jb.sleep(ctx, name, wire.SleepRequest{DurationMillis: &ms})
}

// SleepUntil parks the job until t as step name (at most 365 days ahead;
// a t that has passed does not park). It answers as Sleep does.
func (jb *Job) SleepUntil(ctx context.Context, name string, t time.Time) error {
	u := t.UTC()
	return jb.sleep(ctx, name, wire.SleepRequest{Until: &u})
}

func (jb *Job) sleep(ctx context.Context, name string, req wire.SleepRequest) error {
	if jb.journal == nil {
		return nil
	}
	st, err := jb.journal.sleep(ctx, name, req)
	if err != nil {
		return err
	}
	if st.Status != wire.StepOK {
		return fmt.Errorf("sleep step %s: recorded %s", st.Key, st.Status)
	}
	return nil
}

// WaitForEvent parks the job as step name until the event named event
// with key key is sent (client.SendEvent, POST /events), or timeout
// passes (0: no timeout; rounded up to a millisecond; at most 365 days).
// An event sent before the wait, within the cluster's look-back window,
// matches too. It returns a *ParkedError while the job waits; in the
// attempt after, the event's payload and ok true, or ok false when the
// timeout passed first. A Job not given by a Worker gets ErrNotDurable.
func (jb *Job) WaitForEvent(ctx context.Context, name, event, key string, timeout time.Duration) (payload json.RawMessage, ok bool, err error) {
	return jb.wait(ctx, name, wire.WaitRequest{Event: event, Key: key, TimeoutMillis: ceilMillis(timeout)})
}

// WaitForSignal is WaitForEvent for the signal named signal sent to this
// job (client.Signal, POST /jobs/{id}/signals/{name}).
func (jb *Job) WaitForSignal(ctx context.Context, name, signal string, timeout time.Duration) (payload json.RawMessage, ok bool, err error) {
	return jb.wait(ctx, name, wire.WaitRequest{Signal: signal, TimeoutMillis: ceilMillis(timeout)})
}

func (jb *Job) wait(ctx context.Context, name string, req wire.WaitRequest) (json.RawMessage, bool, error) {
	if jb.journal == nil {
		return nil, false, fmt.Errorf("wait step %s: %w", name, ErrNotDurable)
	}
	st, err := jb.journal.wait(ctx, name, req)
	if err != nil {
		return nil, false, err
	}
	switch st.Status {
	case wire.StepOK:
		return st.Result, true, nil
	case wire.StepTimeout:
		return nil, false, nil
	}
	return nil, false, fmt.Errorf("wait step %s: recorded %s", st.Key, st.Status)
}

// Invoke submits req as a child job of this one, once for step name
// (the step records the child's id when it submits it, so a resend or a
// replay finds the same child), and parks the job until the child
// ends: it returns a *ParkedError meanwhile. In the attempt after, it
// returns the child's result (null when it set none) when the child
// ended done, or a *ChildFailedError (wrapped with NoRetry) when it ended
// failed or cancelled. A Job not given by a Worker gets ErrNotDurable.
func (jb *Job) Invoke(ctx context.Context, name string, req wire.SubmitRequest) (json.RawMessage, error) {
	if jb.journal == nil {
		return nil, fmt.Errorf("invoke step %s: %w", name, ErrNotDurable)
	}
	st, err := jb.journal.invoke(ctx, name, req)
	if err != nil {
		return nil, err
	}
	switch st.Status {
	case wire.StepOK:
		return st.Result, nil
	case wire.StepFailed:
		var end struct {
			Status string `json:"status"`
			Error  string `json:"error"`
		}
		if json.Unmarshal(st.Result, &end) != nil {
			end.Error = string(st.Result)
		}
		return nil, NoRetry(&ChildFailedError{Step: st.Key, ChildID: st.ChildID, Status: end.Status, Message: end.Error})
	}
	return nil, fmt.Errorf("invoke step %s: recorded %s", st.Key, st.Status)
}

// sleep, wait and invoke park the attempt on name's next occurrence (the
// request's lease is set here) and return the step once complete, or a
// *ParkedError.
func (j *journal) sleep(ctx context.Context, name string, req wire.SleepRequest) (*wire.Step, error) {
	return j.park(ctx, name, wire.StepSleep, func(ctx context.Context, key string) (*wire.ParkReply, error) {
		req.Lease = j.lease
		return j.client.SleepStep(ctx, j.jobID, key, req)
	})
}

func (j *journal) wait(ctx context.Context, name string, req wire.WaitRequest) (*wire.Step, error) {
	return j.park(ctx, name, wire.StepWait, func(ctx context.Context, key string) (*wire.ParkReply, error) {
		req.Lease = j.lease
		return j.client.WaitStep(ctx, j.jobID, key, req)
	})
}

func (j *journal) invoke(ctx context.Context, name string, job wire.SubmitRequest) (*wire.Step, error) {
	return j.park(ctx, name, wire.StepInvoke, func(ctx context.Context, key string) (*wire.ParkReply, error) {
		return j.client.InvokeStep(ctx, j.jobID, key, wire.InvokeRequest{Lease: j.lease, Job: job})
	})
}

// park looks up name's next occurrence: a step recorded complete is
// returned as it is (a replay); otherwise send asks the cluster to park
// on it, and a parked answer marks the attempt parked and gives a
// *ParkedError.
func (j *journal) park(ctx context.Context, name, kind string, send func(ctx context.Context, key string) (*wire.ParkReply, error)) (*wire.Step, error) {
	ctx, span := traceStep(ctx, name, kind, nil) // steptrace.go: the step's span
	defer span.end()
	key, rec, err := j.lookup(ctx, name)
	span.lookedUp(key, rec)
	if err != nil {
		return nil, err
	}
	if rec != nil && rec.Status != wire.StepWaiting {
		return rec, nil
	}
	rep, err := send(ctx, key)
	span.parking(rep, err)
	if err != nil {
		return nil, fmt.Errorf("%s step %s: %w", kind, key, err)
	}
	if rep.Parked {
		if j.parked.CompareAndSwap(false, true) && j.onPark != nil {
			j.onPark()
		}
		return nil, &ParkedError{Step: key, Kind: kind}
	}
	return &rep.Step, nil
}

// parkStops is the journal's onPark for the attempt ctx runs: it ends
// the attempt's context with cause ErrParked (a shell job's process is
// stopped, a handler's context ends), and the worker sends no report.
func parkStops(ctx context.Context) func() {
	t, ok := ctx.Value(taskKey{}).(*task)
	if !ok {
		return nil
	}
	return func() { t.cancel(ErrParked) }
}

// ceilMillis is d in whole milliseconds, rounded up; 0 for d <= 0.
func ceilMillis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
