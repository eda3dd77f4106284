package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/raftnode"
	"github.com/workron/workron/store"
)

// handleHealth is served by every node from its own view; 503 without a leader.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	h := s.health()
	if h.Leader == "" {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, h)
		return
	}
	writeJSON(w, http.StatusOK, h)
}

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
	out := wire.Cluster{Leader: leader, AppliedIndex: st.AppliedIndex, Term: st.Term}
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

// handleJoin adds a node to the cluster (if it is not a member already) and
// records its HTTP address. Nodes call it at start to announce themselves.
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
	servers, err := s.node.Servers()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	member := false
	for _, sv := range servers {
		if sv.ID == req.ID && sv.Addr == req.Raft {
			member = true
		}
	}
	if !member {
		if err := s.node.AddVoter(r.Context(), req.ID, req.Raft); err != nil {
			s.fail(w, r, err)
			return
		}
		s.logger.Info("node joined", "node", req.ID, "raft", req.Raft, "http", req.HTTP)
	}
	if _, err := s.propose(r.Context(), fsm.Cmd{Op: fsm.OpSetNode, Node: &store.Node{ID: req.ID, HTTP: req.HTTP, Raft: req.Raft}}); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.Node{ID: req.ID, HTTP: req.HTTP, Raft: req.Raft})
}

// handleRemove takes a node out of the cluster.
func (s *Server) handleRemove(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	servers, err := s.node.Servers()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	found := false
	for _, sv := range servers {
		found = found || sv.ID == id
	}
	if !found {
		writeError(w, http.StatusNotFound, "not_found", "no cluster member "+id)
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
	w.WriteHeader(http.StatusNoContent)
}

// handleBackup streams a consistent copy of the state file.
func (s *Server) handleBackup(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="workron-backup.db"`)
	if _, err := s.node.WriteBackup(w); err != nil {
		s.logger.Error("backup failed", "err", err)
	}
}

// handleRestore replaces the whole cluster's state with the backup in the
// body, through Raft (raftnode.Node.Restore): every node gets it. A body
// that is not a whole backup is refused (400 bad_backup) and changes nothing.
func (s *Server) handleRestore(w http.ResponseWriter, r *http.Request) {
	info, err := s.node.Restore(r.Context(), http.MaxBytesReader(w, r.Body, s.cfg.MaxRestoreBytes))
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "too_large",
			fmt.Sprintf("a backup of more than %d bytes; nothing was done", tooBig.Limit))
		return
	case errors.Is(err, store.ErrDamaged):
		writeError(w, http.StatusBadRequest, "bad_backup", "not restored, nothing was changed: the backup is "+
			strings.TrimPrefix(strings.TrimPrefix(err.Error(), "restore: "), "store: "))
		return
	case errors.Is(err, raftnode.ErrUnknownOutcome):
		writeError(w, http.StatusGatewayTimeout, "outcome_unknown",
			"the restore may or may not have been done; restoring the same backup again is safe")
		return
	default:
		s.fail(w, r, err)
		return
	}
	s.logger.Info("restored a backup", "jobs", info.Jobs, "bytes", info.Size, "backup_index", info.Applied, "index", info.Index)
	writeJSON(w, http.StatusOK, wire.Restore{Jobs: info.Jobs, Bytes: info.Size, BackupIndex: info.Applied, Index: info.Index})
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
		if err := s.announceOnce(ctx); err != nil {
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
	body, _ := json.Marshal(req)
	var last error
	for _, t := range targets {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(t, "/")+"/cluster/join", bytes.NewReader(body))
		if err != nil {
			cancel()
			last = fmt.Errorf("join address %q: %w", t, err)
			continue
		}
		hr.Header.Set("Content-Type", "application/json")
		s.authorize(hr)
		resp, err := s.client.Do(hr)
		cancel()
		if err != nil {
			last = err
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
		last = fmt.Errorf("join via %s: HTTP %d", t, resp.StatusCode)
	}
	return last
}

// OnLeader runs the leader-only work for one term: it records this node's
// address, then reaps expired leases until ctx ends. Pass it to the node as
// raftnode.Config.OnLeader.
func (s *Server) OnLeader(ctx context.Context) {
	s.leaderMu.Lock()
	s.leaderSince = time.Now()
	s.leaderMu.Unlock()
	s.logger.Info("leading: reaper starts after one lease period", "lease_ttl", s.cfg.LeaseTTL)
	if !s.announced() {
		if err := s.announceOnce(ctx); err != nil {
			s.logger.Warn("record own address", "err", err)
		}
	}
	loops := []interface{ run(context.Context) }{&reaper{s: s}, &sweeper{s: s}, &scheduler{s: s}, &admission{s: s}}
	var wg sync.WaitGroup
	for _, l := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.run(ctx)
		}()
	}
	wg.Wait()
}
