package api

import (
	"context"

	"github.com/workron/workron/store"
)

// What the leader loops (leader) need of the API: the metrics and
// job logs of what they changed (leader.Recorder), and this node's address
// recorded on gaining leadership (leader.Config.Establish). Which workers
// count as alive (leader.Liveness) is package liveness's, which node hands
// to both.

// AttemptEnded records an attempt the reaper ended: where the job went and
// how long the attempt ran.
func (s *Server) AttemptEnded(ctx context.Context, j *store.Job, expired bool) {
	s.attemptEnded(ctx, j, expired)
}

// JobFired counts a job a schedule created.
func (s *Server) JobFired(j *store.Job) {
	s.metrics.submitted.of(j.Queue).Inc()
}

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
