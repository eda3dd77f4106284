package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
)

// Telling a worker at once what to do with its attempts.
//
// A worker learns that an attempt must stop (its job cancelled, its gang
// draining) from its heartbeat's reply, which comes a third of the lease
// TTL apart. A worker that wants to know sooner also holds POST
// /workers/{id}/actions while it runs jobs: one long-poll per worker, not
// per job, parked on this node's own state (fsm.WatchStops: woken after
// the entry that stops one of the worker's attempts applies here), never
// forwarded, proposing nothing. A follower answers from its state, at
// most a commit behind the leader's. The heartbeat stays the path of v0
// workers and the fallback of the others.

// handleWorkerActions answers the actions of the worker's attempts other
// than those it names as known, waiting up to the request's wait for one.
func (s *Server) handleWorkerActions(w http.ResponseWriter, r *http.Request) {
	var req wire.WorkerActionsRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	known, wait, err := s.actionsArgs(&req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id := r.PathValue("id")
	wk, err := s.state.Worker(id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if tok := tokenName(r.Context()); tok != "" && wk.Owner != "" && wk.Owner != tok {
		s.fail(w, r, fmt.Errorf("worker %s belongs to another token: %w", id, fsm.ErrForbidden))
		return
	}
	acts, err := s.awaitActions(r.Context(), id, known, wait)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := wire.WorkerActionsResponse{Actions: make([]wire.JobAction, 0, len(acts))}
	for _, a := range acts {
		out.Actions = append(out.Actions, wire.JobAction{JobID: a.JobID, Lease: a.Lease, Action: a.Action, PreemptionEpoch: a.Epoch})
	}
	writeJSON(w, http.StatusOK, out)
}

// actionsArgs checks an actions request: the known attempts (at most
// MaxHeartbeatJobs) by job id, and the wait, capped by MaxWait.
func (s *Server) actionsArgs(req *wire.WorkerActionsRequest) (map[string]uint64, time.Duration, error) {
	if len(req.Known) > MaxHeartbeatJobs {
		return nil, 0, invalid("known", "more than %d leases", MaxHeartbeatJobs)
	}
	known := make(map[string]uint64, len(req.Known))
	for _, l := range req.Known {
		known[l.JobID] = l.Lease
	}
	var wait time.Duration
	if req.Wait != "" {
		d, err := wire.ParseDuration("wait", req.Wait)
		if err != nil {
			return nil, 0, invalid("", "%s", err.Error())
		}
		wait = min(d, s.cfg.MaxWait)
	}
	return known, wait, nil
}

// awaitActions returns the actions of worker's attempts not in known, as
// soon as there is one, or none after wait (or when ctx ends or the node
// drains). A wait takes one of this node's Config.MaxLongPolls slots of
// its own (errTooManyLongPolls beyond, when nothing is to be answered).
func (s *Server) awaitActions(ctx context.Context, worker string, known map[string]uint64, wait time.Duration) ([]fsm.Action, error) {
	acts, err := s.state.StopActions(worker, known)
	if err != nil || len(acts) > 0 || wait <= 0 {
		return acts, err
	}
	select {
	case s.watches <- struct{}{}:
		defer func() { <-s.watches }()
	default:
		return nil, errTooManyLongPolls
	}
	known = s.state.LeasedTo(worker, known) // what it waits with: no more than the worker holds
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		stopped, done := s.state.WatchStops(worker)
		acts, err := s.state.StopActions(worker, known)
		if err != nil || len(acts) > 0 {
			done()
			return acts, err
		}
		select {
		case <-stopped:
			done()
			continue
		case <-timer.C:
		case <-ctx.Done():
		case <-s.draining:
		}
		done()
		return nil, nil
	}
}
