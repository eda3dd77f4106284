package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
)

// HealthProbeTimeout bounds how long GET /cluster waits for each member's
// GET /health; members are asked concurrently, so a down member costs one
// timeout, not one per member.
const HealthProbeTimeout = 500 * time.Millisecond

// probeHealth fills in each node's Health: this node's from its own figures,
// the others' by asking them, all at once.
func (s *Server) probeHealth(ctx context.Context, nodes []wire.Node) {
	ctx, cancel := context.WithTimeout(ctx, HealthProbeTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i := range nodes {
		n := &nodes[i]
		switch {
		case n.ID == s.node.ID():
			n.Health = s.ownHealth()
		case n.HTTP == "":
			continue
		default:
			wg.Go(func() { n.Health = s.probe(ctx, n.ID, n.HTTP) })
		}
	}
	wg.Wait()
}

func (s *Server) ownHealth() *wire.NodeHealth {
	h := s.health()
	return &wire.NodeHealth{Reachable: true, Status: h.Status, Role: h.Role, AppliedIndex: h.AppliedIndex, Term: h.Term, Protocol: h.Protocol,
		DiskLow: h.Disk != nil && h.Disk.Low}
}

// ReadyWait is how long GET /health?ready=1 waits for this node to apply
// the leader's commit index before it answers 503 catching_up.
const ReadyWait = time.Second

// handleHealth is served by every node from its own view: 503 without a
// leader, and once removed from the cluster. With ?ready=1 it also answers
// 503 until this node has applied what the leader has committed.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	h := s.health()
	if q := r.URL.Query().Get("ready"); q == "1" || q == "true" {
		h = s.readiness(r.Context(), h)
	}
	if h.Status != wire.HealthOK {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, h)
		return
	}
	writeJSON(w, http.StatusOK, h)
}

// health is this node's answer to GET /health.
func (s *Server) health() wire.Health {
	leader, _ := s.node.Leader()
	st := s.node.Stats()
	h := wire.Health{Status: wire.HealthOK, NodeID: s.node.ID(), Role: s.node.Role(), Leader: leader,
		AppliedIndex: st.AppliedIndex, CommitIndex: st.CommitIndex, Term: st.Term, Protocol: fsm.ProtocolVersion,
		Disk: s.readDisk().health()}
	switch {
	case s.node.Removed():
		h.Status = wire.HealthRemoved
	case leader == "":
		h.Status = wire.HealthNoLeader
	}
	return h
}

// readiness turns a healthy answer h into GET /health?ready=1's: it learns
// the leader's commit index (from the leader over HTTP; a leader confirms
// its leadership with a quorum and reads its own) and waits up to ReadyWait
// for this node to apply that far. A node that restarted and is still
// waiting for the leader's entries (Raft retries a peer that was down with
// a back-off of up to about 10 s) knows no commit index beyond its own log,
// so its own figures cannot tell it is behind; the leader's can.
func (s *Server) readiness(ctx context.Context, h wire.Health) wire.Health {
	if h.Status != wire.HealthOK {
		return h
	}
	target, err := s.leaderCommitIndex(ctx, h.Leader)
	if err != nil {
		h.Status, h.Error = wire.HealthNoLeader, err.Error()
		return h
	}
	h.LeaderCommitIndex = target
	ctx, cancel := context.WithTimeout(ctx, ReadyWait)
	defer cancel()
	applied := s.node.AppliedIndex()
	for applied < target && ctx.Err() == nil {
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		applied = s.node.AppliedIndex()
	}
	var lag uint64
	if applied < target {
		lag = target - applied
		h.Status = wire.HealthCatchingUp
	}
	h.AppliedIndex, h.Lag = applied, &lag
	return h
}

// leaderCommitIndex is the commit index of the leader this node follows.
func (s *Server) leaderCommitIndex(ctx context.Context, leader string) (uint64, error) {
	if leader == s.node.ID() {
		ctx, cancel := context.WithTimeout(ctx, ReadyWait)
		defer cancel()
		if err := s.node.VerifyLeader(ctx); err != nil {
			return 0, fmt.Errorf("confirm leadership with a quorum: %w", err)
		}
		return s.node.Stats().CommitIndex, nil
	}
	u, ok := s.leaderURL()
	if !ok {
		return 0, fmt.Errorf("the HTTP address of the leader %s is not known to this node yet", leader)
	}
	ctx, cancel := context.WithTimeout(ctx, HealthProbeTimeout)
	defer cancel()
	lh, err := s.fetchHealth(ctx, u.String())
	if err != nil {
		return 0, fmt.Errorf("ask the leader %s for its commit index: %w", leader, err)
	}
	if lh.NodeID != leader || lh.Role != "leader" {
		return 0, fmt.Errorf("%s answers as node %s, role %s: leadership is changing", u, lh.NodeID, lh.Role)
	}
	return lh.CommitIndex, nil
}

// probe asks one node for its health. A 503 with a health body (no leader
// known) still counts as reachable; an answer from another node id does not.
func (s *Server) probe(ctx context.Context, id, base string) *wire.NodeHealth {
	h, err := s.fetchHealth(ctx, base)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return &wire.NodeHealth{Error: fmt.Sprintf("no answer within %s", HealthProbeTimeout)}
		}
		return &wire.NodeHealth{Error: err.Error()}
	}
	if h.NodeID != id {
		return &wire.NodeHealth{Error: fmt.Sprintf("%s answers as node %s", base, h.NodeID)}
	}
	return &wire.NodeHealth{Reachable: true, Status: h.Status, Role: h.Role, AppliedIndex: h.AppliedIndex, Term: h.Term,
		Protocol: max(h.Protocol, 1), DiskLow: h.Disk != nil && h.Disk.Low}
}

// fetchHealth asks the node at base for its GET /health, whatever the
// status: a 503 carries a health body too.
func (s *Server) fetchHealth(ctx context.Context, base string) (wire.Health, error) {
	var h wire.Health
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/health", nil)
	if err != nil {
		return h, err
	}
	if rid := requestID(ctx); rid != "" {
		req.Header.Set(headerRequestID, rid)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&h); err != nil || h.NodeID == "" {
		return h, fmt.Errorf("GET /health: HTTP %d without a health body", resp.StatusCode)
	}
	return h, nil
}
