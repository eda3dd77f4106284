package api

import (
	"context"
	"fmt"

	"github.com/workron/workron/store"
)

// What the leader loops (leader) need of the API: the metrics and
// job logs of what they changed (leader.Recorder), this node's address
// recorded on gaining leadership (leader.Config.Establish), and how far a
// joined non-voter has applied the log (leader.Progress). Which workers
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

// AppliedIndexOf is the applied index the member id reports in its GET
// /health, asked at the HTTP address the state records for it, within
// HealthProbeTimeout (leader.Progress: the promoter's view of a joined
// non-voter). An error when the state holds no address for id yet, the
// node does not answer, or another node answers there.
func (s *Server) AppliedIndexOf(ctx context.Context, id string) (uint64, error) {
	nodes, err := s.state.Nodes()
	if err != nil {
		return 0, fmt.Errorf("read the nodes: %w", err)
	}
	base := ""
	for _, n := range nodes {
		if n.ID == id {
			base = n.HTTP
		}
	}
	if base == "" {
		return 0, fmt.Errorf("the HTTP address of %s is not recorded yet", id)
	}
	ctx, cancel := context.WithTimeout(ctx, HealthProbeTimeout)
	defer cancel()
	h, err := s.fetchHealth(ctx, base)
	if err != nil {
		return 0, fmt.Errorf("ask %s at %s for its applied index: %w", id, base, err)
	}
	if h.NodeID != id {
		return 0, fmt.Errorf("%s answers as node %s, not %s", base, h.NodeID, id)
	}
	return h.AppliedIndex, nil
}
