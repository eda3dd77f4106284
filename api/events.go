package api

import (
	"context"
	"log/slog"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// This file records the job transitions this node caused, as the leader
// that proposed them: one counter per transition (by queue), the start and
// run time histograms, and one log line per job. Routine transitions
// (submitted, claimed, done) log at debug level; the others (retried,
// failed, expired, cancelled) at info. Every line carries the job id, its
// attempt, worker and lease where it has them, and the id of the request
// that caused it ("" for the leader's own loops).
//
// Transitions a command causes as a side effect (dependents unblocked,
// failed or cancelled with their dependency) are not counted here; the queue
// gauges show them.

// logJob writes one transition line.
func (s *Server) logJob(ctx context.Context, level slog.Level, msg string, j *store.Job, attrs ...any) {
	if !s.logger.Enabled(ctx, level) {
		return
	}
	base := []any{"job", j.ID, "queue", j.Queue, "status", string(j.Status), "attempt", j.Attempts}
	if j.WorkerID != "" {
		base = append(base, "worker", j.WorkerID)
	}
	if j.Lease != 0 {
		base = append(base, "lease", j.Lease)
	}
	base = append(base, attrs...)
	base = append(base, "request_id", requestID(ctx))
	s.logger.Log(ctx, level, msg, base...)
}

// jobsSubmitted records newly created jobs.
func (s *Server) jobsSubmitted(ctx context.Context, jobs []*store.Job) {
	traceJobs(ctx, jobs...)
	for _, j := range jobs {
		s.metrics.submitted.of(j.Queue).Inc()
		s.logJob(ctx, slog.LevelDebug, "job submitted", j)
	}
}

// jobsClaimed records jobs leased to a worker: each attempt's wait from
// when it could start (its run time) to its claim, and, for a job of a
// queue with limits, how long of that wait the limits held it back (held,
// fsm.Result.Held).
func (s *Server) jobsClaimed(ctx context.Context, jobs []*store.Job, held map[string]int64) {
	s.traceClaimed(ctx, jobs)
	for _, j := range jobs {
		s.metrics.claimed.of(j.Queue).Inc()
		if j.StartedAt >= j.RunAt {
			s.metrics.startLatency.of(j.Queue).Observe(time.Duration(j.StartedAt - j.RunAt).Seconds())
		}
		if d, ok := held[j.ID]; ok {
			s.metrics.limitWait.of(j.Queue).Observe(time.Duration(d).Seconds())
		}
		s.metrics.steps.claimed(j)
		s.logJob(ctx, slog.LevelDebug, "job claimed", j)
	}
}

// attemptEnded records an attempt ended by its worker's report or by the
// reaper: where the job went, and how long the attempt ran.
func (s *Server) attemptEnded(ctx context.Context, j *store.Job, expired bool) {
	s.traceEnded(ctx, j, expired)
	if expired {
		s.metrics.expired.of(j.Queue).Inc()
	}
	s.metrics.finished(j)
	var ran time.Duration
	if n := len(j.History); n > 0 {
		last := j.History[n-1]
		ran = time.Duration(last.Ended - last.Started)
		if !expired && ran >= 0 {
			s.metrics.runDuration.of(j.Queue).Observe(ran.Seconds())
		}
	}
	s.logEnded(ctx, j, expired, ran)
}

// logEnded logs an attempt's end (attemptEnded); it builds its fields only
// when its level is logged.
func (s *Server) logEnded(ctx context.Context, j *store.Job, expired bool, ran time.Duration) {
	level, msg := slog.LevelInfo, "job failed"
	switch {
	case j.Status == store.StatusDone:
		level, msg = slog.LevelDebug, "job done"
	case j.Status == store.StatusPending:
		msg = "job retried"
	case j.Status == store.StatusCancelled:
		msg = "job cancelled"
	}
	if !s.logger.Enabled(ctx, level) {
		return
	}
	if expired {
		msg = "lease expired: " + msg
	}
	attrs := []any{"ran", ran}
	if j.ExitCode != nil {
		attrs = append(attrs, "exit_code", *j.ExitCode)
	}
	if j.Status == store.StatusPending {
		attrs = append(attrs, "retry_at", time.Unix(0, j.RunAt).UTC())
	}
	if j.LastError != "" && j.Status != store.StatusDone {
		attrs = append(attrs, "error", j.LastError)
	}
	s.logJob(ctx, level, msg, j, attrs...)
}

// jobChanged records a cancel or a retry through the API.
func (s *Server) jobChanged(ctx context.Context, op fsm.Op, j *store.Job) {
	traceJobs(ctx, j)
	switch op {
	case fsm.OpCancel, fsm.OpCancelChunked:
		s.metrics.cancelled.of(j.Queue).Inc()
		msg := "job cancelled"
		if j.Status == store.StatusCancelling {
			msg = "job cancelling: its worker is told on its next heartbeat"
		}
		s.logJob(ctx, slog.LevelInfo, msg, j)
	case fsm.OpRetry, fsm.OpRetryDependents, fsm.OpRetryDependentsChunked:
		s.metrics.retried.of(j.Queue).Inc()
		s.logJob(ctx, slog.LevelInfo, "job retried", j, "by", "request")
	}
}
