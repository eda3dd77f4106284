package api

import (
	"context"
	"time"

	"github.com/workron/workron/store"
)

// What the leader loops (leader) need of the API: the metrics and
// job logs of what they changed (leader.Recorder), which workers this node
// counts as alive (leader.Liveness), and this node's address recorded on
// gaining leadership (leader.Config.Establish).

// AttemptEnded records an attempt the reaper ended: where the job went and
// how long the attempt ran.
func (s *Server) AttemptEnded(ctx context.Context, j *store.Job, expired bool) {
	s.attemptEnded(ctx, j, expired)
}

// JobFired counts a job a schedule created.
func (s *Server) JobFired(j *store.Job) {
	s.metrics.submitted.of(j.Queue).Inc()
}

// Active reports whether this node counts w as alive at now: heard from
// within WorkerOfflineAfter (long-polls here included) and not declared
// offline since.
func (s *Server) Active(w *store.Worker, now time.Time) bool { return s.active(w, now) }

// LastSeen is when this node last heard from w.
func (s *Server) LastSeen(w *store.Worker) time.Time { return s.lastSeen(w) }

// WorkerOfflineAfter is how long a silent worker counts as alive here.
func (s *Server) WorkerOfflineAfter() time.Duration { return s.cfg.WorkerOfflineAfter }

// RecordAddress makes sure, on gaining leadership, that the state holds
// this node's addresses, so that others can forward to it; a failure is
// logged (Announce keeps trying).
func (s *Server) RecordAddress(ctx context.Context) {
	if !s.announced() {
		if err := s.announceOnce(ctx); err != nil {
			s.logger.Warn("record own address", "err", err)
		}
	}
}
