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
	return &wire.NodeHealth{Reachable: true, Status: h.Status, Role: h.Role, AppliedIndex: h.AppliedIndex, Term: h.Term, Protocol: h.Protocol}
}

// health is this node's answer to GET /health.
func (s *Server) health() wire.Health {
	leader, _ := s.node.Leader()
	st := s.node.Stats()
	h := wire.Health{Status: "ok", NodeID: s.node.ID(), Role: s.node.Role(), Leader: leader, AppliedIndex: st.AppliedIndex, Term: st.Term,
		Protocol: fsm.ProtocolVersion}
	if leader == "" {
		h.Status = "no_leader"
	}
	return h
}

// probe asks one node for its health. A 503 with a health body (no leader
// known) still counts as reachable; an answer from another node id does not.
func (s *Server) probe(ctx context.Context, id, base string) *wire.NodeHealth {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/health", nil)
	if err != nil {
		return &wire.NodeHealth{Error: err.Error()}
	}
	if rid := requestID(ctx); rid != "" {
		req.Header.Set(headerRequestID, rid)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return &wire.NodeHealth{Error: fmt.Sprintf("no answer within %s", HealthProbeTimeout)}
		}
		return &wire.NodeHealth{Error: err.Error()}
	}
	defer resp.Body.Close()
	var h wire.Health
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&h); err != nil || h.NodeID == "" {
		return &wire.NodeHealth{Error: fmt.Sprintf("GET /health: HTTP %d without a health body", resp.StatusCode)}
	}
	if h.NodeID != id {
		return &wire.NodeHealth{Error: fmt.Sprintf("%s answers as node %s", base, h.NodeID)}
	}
	return &wire.NodeHealth{Reachable: true, Status: h.Status, Role: h.Role, AppliedIndex: h.AppliedIndex, Term: h.Term,
		Protocol: max(h.Protocol, 1)}
}
