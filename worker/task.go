package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/workron/workron/api/wire"
)

// Why a job's context ended early. Their texts are what /fail reports.
var (
	errCancelled  = errors.New("cancelled")
	errPreempted  = errors.New("preempted")
	errShutdown   = errors.New("worker shutting down")
	errSuperseded = errors.New("superseded by a newer lease of the same job")
)

// timeoutError ends a job that ran past its timeout.
type timeoutError struct{ timeout string }

func (e *timeoutError) Error() string { return "timed out after " + e.timeout }

// noRetryError marks a handler's failure as final.
type noRetryError struct{ err error }

func (e *noRetryError) Error() string { return e.err.Error() }
func (e *noRetryError) Unwrap() error { return e.err }

// NoRetry wraps err so that the job fails for good instead of being retried.
// NoRetry(nil) is nil.
func NoRetry(err error) error {
	if err == nil {
		return nil
	}
	return &noRetryError{err: err}
}

// task is one claimed job while it runs and reports.
type task struct {
	job      wire.Job
	cancel   context.CancelCauseFunc
	progress progressSlot
	stopped  atomic.Bool // the server asked to stop it (cancelJob)
	// leaseEnd is when the attempt's lease ends by the worker's clock
	// (unix nanoseconds), unless a heartbeat renews it (leasesRenewed);
	// leaseGone is set once the run ended or the worker stopped it for
	// its lease (stopLost), and leaseLost too in the latter case.
	leaseEnd  atomic.Int64
	leaseGone atomic.Bool
	leaseLost atomic.Bool
}

// outcome is how one run ended: err nil means success.
type outcome struct {
	exitCode *int
	output   string
	err      error
	retry    *bool                // nil leaves the decision to the server
	hold     holdOff              // a failure that asks not to count (holdoff.go)
	result   json.RawMessage      // a successful run's result, nil: none
	progress *wire.ProgressUpdate // the last progress no heartbeat carried
	parked   bool                 // the attempt parked (park.go) or was superseded: no report
}

// failFinal is an outcome that must not be retried.
func failFinal(err error) outcome {
	no := false
	return outcome{err: err, retry: &no}
}

// start runs job in a goroutine of its own: execute, then report.
func (w *Worker) start(base, jobCtx context.Context, job wire.Job) {
	ctx, cancel := context.WithCancelCause(jobCtx)
	t := &task{job: job, cancel: cancel}
	// The lease began before the claim's reply came: its receipt is the
	// latest bound the worker has (late by at most the reply's transit).
	t.leaseEnd.Store(time.Now().Add(w.currentLeaseTTL()).UnixNano())
	w.watchLease(t)
	t.progress.notify = w.progressed
	ctx = withTask(ctx, t)
	w.mu.Lock()
	if old := w.running[job.ID]; old != nil {
		w.log.Warn("job claimed again while running: stopping the old attempt",
			"job_id", job.ID, "old_lease", old.job.Lease, "lease", job.Lease)
		old.cancel(errSuperseded)
	}
	w.running[job.ID] = t
	w.mu.Unlock()
	signal(w.jobsBegan)
	signal(w.watchJobs)

	w.jobs.Go(func() {
		defer w.finish(t)
		job := t.job // not start's: the closure would move that copy to the heap
		log := w.jobLog(job)
		if log.Enabled(ctx, slog.LevelDebug) {
			log.Debug("job started", "command", job.Command, "type", job.Type)
		}
		job, ck := w.withCheckpoint(log, job)
		defer ck.remove()
		ctx, job, endRun := w.traceRun(ctx, job)
		began := time.Now()
		out := w.execute(ctx, job)
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, ErrParked):
			// The cluster ended the attempt; whatever the run said after
			// that (a stale lease, a killed process) is not reported.
			out = outcome{parked: true}
		case errors.Is(cause, ErrLeaseLost):
			// The cluster expired the lease (or refused it): another
			// worker may run the job, and a report could only be refused.
			out = outcome{parked: true, err: cause}
		case errors.Is(cause, errSuperseded):
			// The cluster leased the job again, here: this attempt's
			// lease is not current, and a report of it could only be
			// refused (as stale). So is one of an attempt that parked
			// while its job woke at once.
			out = outcome{parked: true, err: cause}
		}
		endRun(out.err)
		t.leaseGone.Store(true) // the run is over: nothing left to stop
		cancel(nil)
		out.progress, _ = t.progress.pending() // the report carries it
		switch {
		case !log.Enabled(ctx, slog.LevelInfo):
		case out.parked && out.err != nil:
			log.Info("job stopped: not reported", "err", out.err, "took", time.Since(began))
		case out.parked:
			log.Info("job parked", "took", time.Since(began))
		case out.err != nil:
			log.Info("job failed", "err", out.err, "exit_code", deref(out.exitCode), "took", time.Since(began))
		default:
			log.Info("job done", "took", time.Since(began))
		}
		w.settle(base, log, job, out, ck)
	})
}

// jobLog is the logger of job's attempt: the worker's with the job's id,
// attempt and lease, or the worker's own when it logs nothing (the SDK's
// default), which would otherwise cost each job a logger of its own.
func (w *Worker) jobLog(job wire.Job) *slog.Logger {
	if w.log.Handler() == slog.DiscardHandler {
		return w.log
	}
	return w.log.With("job_id", job.ID, "attempt", job.Attempts, "lease", job.Lease)
}

// finish frees t's slot.
func (w *Worker) finish(t *task) {
	w.mu.Lock()
	if w.running[t.job.ID] == t {
		delete(w.running, t.job.ID)
	}
	w.mu.Unlock()
	signal(w.slotFreed)
}

// cancelJob stops the running job id with cause when lease matches its
// lease (or is 0), and reports whether it did.
func (w *Worker) cancelJob(id string, lease uint64, cause error) bool {
	w.mu.Lock()
	t := w.running[id]
	w.mu.Unlock()
	if t == nil || (lease != 0 && lease != t.job.Lease) {
		return false
	}
	t.stopped.Store(true)
	t.cancel(cause)
	return true
}

// execute runs job under its timeout and returns how it ended.
func (w *Worker) execute(ctx context.Context, job wire.Job) outcome {
	if err := w.client.FetchParentResults(ctx, &job); err != nil {
		// The claim reply cut the parents' results short and the rest
		// could not be read: another attempt may.
		if cause := stopCause(ctx); cause != nil {
			return stoppedOutcome(cause, nil, "")
		}
		return outcome{err: fmt.Errorf("fetch the rest of the parent results: %w", err)}
	}
	if job.Timeout != "" {
		// Not wire.ParseDuration: the cluster checked the timeout when it
		// took the job, and a release with other limits may have taken it.
		d, err := time.ParseDuration(job.Timeout)
		if err != nil {
			return failFinal(fmt.Errorf("timeout: %q is not a duration: %w", job.Timeout, err))
		}
		if d > 0 {
			var stop context.CancelFunc
			ctx, stop = context.WithTimeoutCause(ctx, d, &timeoutError{timeout: job.Timeout})
			defer stop()
		}
	}
	switch {
	case job.Command != "" && !w.cfg.Shell:
		// The server should not have sent it; let another worker take it.
		return outcome{err: fmt.Errorf("worker %s does not run shell commands", w.cfg.ID)}
	case job.Command != "":
		return w.runShell(ctx, job)
	case job.Type != "":
		return w.runHandler(ctx, job)
	}
	return failFinal(errors.New("job has neither a command nor a type"))
}

// runHandler calls the handler registered for job.Type, turning a panic into
// a failure.
func (w *Worker) runHandler(ctx context.Context, job wire.Job) (out outcome) {
	h := w.handler(job.Type)
	if h == nil {
		return failFinal(fmt.Errorf("no handler for job type %q on worker %s", job.Type, w.cfg.ID))
	}
	defer func() {
		if r := recover(); r != nil {
			w.log.Error("handler panicked", "job_id", job.ID, "type", job.Type, "panic", r, "stack", string(debug.Stack()))
			out = outcome{err: fmt.Errorf("panic: %v", r)}
		}
	}()
	hj := &Job{
		ID:            job.ID,
		Type:          job.Type,
		Queue:         job.Queue,
		Payload:       job.Payload,
		Attempt:       job.Attempts,
		Metadata:      job.Metadata,
		Env:           job.Env,
		ParentResults: job.ParentResults,
		TraceParent:   job.TraceParent,
		progress:      progressOf(ctx),
		journal:       newJournal(w.client, &job),
	}
	hj.journal.onPark = parkStops(ctx)
	err := h(ctx, hj)
	if hj.journal.parked.Load() {
		if !errors.Is(err, ErrParked) {
			w.log.Warn("handler went on after its job parked: its end is not reported", "job_id", job.ID, "type", job.Type, "err", err)
		}
		return outcome{parked: true}
	}
	if err == nil {
		return outcome{result: hj.result}
	}
	var nr *noRetryError
	if errors.As(err, &nr) {
		return failFinal(err)
	}
	if h, ok := holdOffOf(err); ok && stopCause(ctx) == nil {
		return outcome{err: err, hold: h}
	}
	if cause := stopCause(ctx); cause != nil &&
		(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, cause)) {
		return stoppedOutcome(cause, nil, "")
	}
	return outcome{err: err}
}

// stopCause returns why ctx ended, or nil while it has not.
func stopCause(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	return context.Cause(ctx)
}

// stoppedOutcome is the outcome of a job the worker stopped because of cause.
func stoppedOutcome(cause error, exitCode *int, output string) outcome {
	out := outcome{exitCode: exitCode, output: output, err: cause}
	if errors.Is(cause, errCancelled) {
		no := false
		out.retry = &no
	}
	return out
}

// signal wakes whoever waits on ch, without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}
