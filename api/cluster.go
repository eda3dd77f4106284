package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/raftnode"
	"github.com/workron/workron/store"
)

// handleCluster shows the Raft configuration with each member's addresses
// and health, probed just now (see HealthProbeTimeout).
func (s *Server) handleCluster(w http.ResponseWriter, r *http.Request) {
	servers, err := s.node.Servers()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	nodes, err := s.state.Nodes()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	httpOf := make(map[string]string, len(nodes))
	for _, n := range nodes {
		httpOf[n.ID] = n.HTTP
	}
	leader, _ := s.node.Leader()
	st := s.node.Stats()
	out := wire.Cluster{Leader: leader, AppliedIndex: st.AppliedIndex, Term: st.Term, Protocol: s.node.ClusterProtocol()}
	if !st.LastContact.IsZero() && s.node.Role() != "leader" {
		t := st.LastContact.UTC()
		out.LastContact = &t
	}
	for _, sv := range servers {
		role := "follower"
		switch {
		case sv.ID == leader:
			role = "leader"
		case !sv.Voter:
			role = "nonvoter"
		}
		if sv.ID == s.node.ID() {
			role = s.node.Role()
		}
		out.Nodes = append(out.Nodes, wire.Node{ID: sv.ID, HTTP: httpOf[sv.ID], Raft: sv.Addr, Role: role})
	}
	s.probeHealth(r.Context(), out.Nodes)
	writeJSON(w, http.StatusOK, out)
}

// JoinPromoteWait bounds how long POST /cluster/join waits for the node it
// added to become a voter before it answers (role "nonvoter" then; the
// leader's promoter goes on). It stays below the 5 s a joining node waits
// for the answer (callPeer).
const JoinPromoteWait = 3 * time.Second

// handleJoin adds a node to the cluster (if it is not a member already) and
// records its HTTP address. Nodes call it at start to announce themselves.
// A new node joins as a non-voter: it counts for no majority until the
// leader's promoter (leader.Promoter) has seen it catch up and made it a
// voter, so a join never leaves the cluster without a majority while the
// node installs the state. The answer waits up to JoinPromoteWait for that
// and gives the node's role; a voter stays a voter.
func (s *Server) handleJoin(w http.ResponseWriter, r *http.Request) {
	var req wire.JoinRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	switch {
	case req.ID == "":
		s.fail(w, r, invalid("id", "must not be empty"))
		return
	case req.Raft == "":
		s.fail(w, r, invalid("raft", "must be the node's Raft host:port"))
		return
	case req.HTTP == "":
		s.fail(w, r, invalid("http", "must be the node's HTTP base URL"))
		return
	}
	if _, err := url.Parse(req.HTTP); err != nil {
		s.fail(w, r, invalid("http", "%q is not a URL", req.HTTP))
		return
	}
	sv, err := s.member(req.ID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if sv == nil || sv.Addr != req.Raft {
		if err := s.node.AddNonvoter(r.Context(), req.ID, req.Raft); err != nil {
			s.fail(w, r, err)
			return
		}
		s.logger.Info("node joined as a non-voter; it votes once it has caught up", "node", req.ID, "raft", req.Raft, "http", req.HTTP)
	}
	if _, err := s.propose(r.Context(), fsm.Cmd{Op: fsm.OpSetNode, Node: &store.Node{ID: req.ID, HTTP: req.HTTP, Raft: req.Raft}}); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.Node{ID: req.ID, HTTP: req.HTTP, Raft: req.Raft, Role: s.awaitVoter(r.Context(), req.ID)})
}

// member is the configuration's entry for id, nil if it holds none.
func (s *Server) member(id string) (*raftnode.Server, error) {
	servers, err := s.node.Servers()
	if err != nil {
		return nil, err
	}
	for i := range servers {
		if servers[i].ID == id {
			return &servers[i], nil
		}
	}
	return nil, nil
}

// awaitVoter waits up to JoinPromoteWait for id to be a voter and returns
// its role as GET /cluster names it: "leader", "follower" (a voter) or
// "nonvoter".
func (s *Server) awaitVoter(ctx context.Context, id string) string {
	ctx, cancel := context.WithTimeout(ctx, JoinPromoteWait)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if sv, err := s.member(id); err == nil && sv != nil && sv.Voter {
			if leader, _ := s.node.Leader(); leader == id {
				return "leader"
			}
			return "follower"
		}
		select {
		case <-ctx.Done():
			return "nonvoter"
		case <-t.C:
		}
	}
}

// RemoveTimeout bounds how long DELETE /cluster/nodes/{id} of the leader
// waits for leadership to move and for the new leader to remove it.
const RemoveTimeout = 15 * time.Second

// handleRemove takes a node out of the cluster. It runs on the leader. To
// remove the leader itself, it first hands leadership to another voter and
// then asks the new leader to remove it (see removeSelf): a leader that
// removes itself leaves the cluster without a leader until an election, and
// cannot write the state's record of the removal.
func (s *Server) handleRemove(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	servers, err := s.node.Servers()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	found, others := false, 0
	for _, sv := range servers {
		found = found || sv.ID == id
		if sv.ID != id && sv.Voter {
			others++
		}
	}
	switch {
	case !found:
		writeError(w, wire.CodeNotFound, "no cluster member "+id)
		return
	case others == 0:
		writeError(w, wire.CodeConflict, id+" is the cluster's only voter; a cluster cannot remove its last voter")
		return
	case id == s.node.ID():
		s.removeSelf(w, r)
		return
	}
	if err := s.node.RemoveServer(r.Context(), id); err != nil {
		s.fail(w, r, err)
		return
	}
	if _, err := s.propose(r.Context(), fsm.Cmd{Op: fsm.OpRemoveNode, Node: &store.Node{ID: id}}); err != nil {
		s.fail(w, r, err)
		return
	}
	s.logger.Info("node removed", "node", id)
	writeJSON(w, http.StatusOK, wire.Removal{Removed: id, Leader: s.node.ID(),
		Message: fmt.Sprintf("%s removed %s from the cluster", s.node.ID(), id)})
}

// removeSelf removes this node, the leader: it hands leadership over, waits
// until it knows the new leader's address, and sends the removal there.
func (s *Server) removeSelf(w http.ResponseWriter, r *http.Request) {
	self := s.node.ID()
	ctx, cancel := context.WithTimeout(r.Context(), RemoveTimeout)
	defer cancel()
	if err := s.node.TransferLeadership(ctx); err != nil {
		s.fail(w, r, err)
		return
	}
	s.logger.Info("handed leadership over to remove this node")
	status, body, err := s.removeAtLeader(ctx, self)
	switch {
	case errors.Is(err, raftnode.ErrUnknownOutcome):
		writeError(w, wire.CodeOutcomeUnknown,
			fmt.Sprintf("%s handed leadership over, but the new leader's answer to its removal was lost (%v): see workron cluster status", self, err))
		return
	case err != nil:
		writeError(w, wire.CodeNoLeader,
			fmt.Sprintf("%s handed leadership over but could not have the new leader remove it (%v); %s is still a member: retry", self, err, self))
		return
	case status != http.StatusOK:
		// The new leader's own refusal, passed on as it is.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
		return
	}
	var rm wire.Removal
	if err := json.Unmarshal(body, &rm); err != nil {
		s.fail(w, r, fmt.Errorf("decode the new leader's reply: %w", err))
		return
	}
	rm.LeadershipMoved = true
	rm.Message = fmt.Sprintf("%s led: it handed leadership to %s, which removed %s from the cluster", self, rm.Leader, self)
	writeJSON(w, http.StatusOK, rm)
}

// removeAtLeader asks the leader, once this node knows another one, to
// remove node id, retrying while the answer says nothing was done (503),
// and returns the leader's answer. An error means no leader answered
// otherwise before ctx ended; it wraps raftnode.ErrUnknownOutcome if an
// attempt whose answer was lost may have removed it.
func (s *Server) removeAtLeader(ctx context.Context, id string) (int, []byte, error) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	last := errors.New("no new leader yet")
	maybe := false // an earlier attempt may have reached the leader
	for {
		if lid, _ := s.node.Leader(); lid != "" && lid != s.node.ID() {
			if u, ok := s.leaderURL(); ok {
				status, body, err := s.callPeer(ctx, http.MethodDelete, u.String()+"/cluster/nodes/"+url.PathEscape(id), nil)
				switch {
				case err != nil:
					last, maybe = err, true
				case status == http.StatusServiceUnavailable:
					last = fmt.Errorf("the new leader %s answered HTTP %d: %s", lid, status, bytes.TrimSpace(body))
				case status == http.StatusNotFound && maybe:
					// The attempt whose answer was lost removed it.
					b, err := json.Marshal(wire.Removal{Removed: id, Leader: lid})
					return http.StatusOK, b, err
				default:
					return status, body, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			if maybe {
				return 0, nil, fmt.Errorf("%w: %w: %w", raftnode.ErrUnknownOutcome, last, ctx.Err())
			}
			return 0, nil, fmt.Errorf("%w: %w", last, ctx.Err())
		case <-t.C:
		}
	}
}

// callPeer sends one request to another node with this node's credentials
// and returns the status and body.
func (s *Server) callPeer(ctx context.Context, method, u string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if rid := requestID(ctx); rid != "" {
		req.Header.Set(headerRequestID, rid)
	}
	s.authorize(req)
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, out, err
}

// refuseIfRemoved answers 503 removed, once this node was removed from the
// cluster, to every request but GET /health (which says "removed"), the
// metrics, /debug/ and the dashboard's files.
func (s *Server) refuseIfRemoved(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if !s.node.Removed() || r.Method == http.MethodGet &&
			(p == "/health" || p == "/metrics" || strings.HasPrefix(p, "/debug/") || p == "/ui" || strings.HasPrefix(p, "/ui/")) {
			next.ServeHTTP(w, r)
			return
		}
		writeError(w, wire.CodeRemoved, s.removedMessage())
	})
}

// removedMessage tells a client of a removed node where to go instead.
func (s *Server) removedMessage() string {
	msg := "node " + s.node.ID() + " was removed from the cluster; nothing was done: send requests to a member"
	nodes, err := s.state.Nodes()
	if err != nil {
		return msg
	}
	var others []string
	for _, n := range nodes {
		if n.ID != s.node.ID() && n.HTTP != "" {
			others = append(others, n.ID+" "+n.HTTP)
		}
	}
	if len(others) > 0 {
		msg += " (last known: " + strings.Join(others, ", ") + ")"
	}
	return msg
}

// Announce runs until ctx ends: it makes sure this node is a cluster member
// (asking a JoinURL to add it) and that its HTTP address is in the state, so
// others can forward to it. It is quiet once both hold.
func (s *Server) Announce(ctx context.Context) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		if s.announced() {
			return
		}
		if s.node.Removed() {
			s.logger.Debug("announce: this node was removed from the cluster; not asking to join")
		} else if err := s.announceOnce(ctx); err != nil {
			s.logger.Debug("announce", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// announced reports whether the state already holds this node's addresses.
func (s *Server) announced() bool {
	nodes, err := s.state.Nodes()
	if err != nil {
		return false
	}
	for _, n := range nodes {
		if n.ID == s.node.ID() && n.HTTP == s.cfg.AdvertiseHTTP && n.Raft == s.node.RaftAddr() {
			return true
		}
	}
	return false
}

func (s *Server) announceOnce(ctx context.Context) error {
	req := wire.JoinRequest{ID: s.node.ID(), Raft: s.node.RaftAddr(), HTTP: s.cfg.AdvertiseHTTP}
	if s.node.IsLeader() {
		_, err := s.propose(ctx, fsm.Cmd{Op: fsm.OpSetNode, Node: &store.Node{ID: req.ID, HTTP: req.HTTP, Raft: req.Raft}})
		return err
	}
	targets := s.cfg.JoinURLs
	if u, ok := s.leaderURL(); ok {
		targets = append([]string{u.String()}, targets...)
	}
	if len(targets) == 0 {
		return fmt.Errorf("no leader known yet and no --join address")
	}
	var last error
	for _, t := range targets {
		status, _, err := s.callPeer(ctx, http.MethodPost, strings.TrimRight(t, "/")+"/cluster/join", req)
		switch {
		case err != nil:
			last = fmt.Errorf("join via %s: %w", t, err)
		case status == http.StatusOK:
			return nil
		default:
			last = fmt.Errorf("join via %s: HTTP %d", t, status)
		}
	}
	return last
}
