package api

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// claimRetryPause is how long a long-poll waits after a claim came back
// empty although a job looked ready (another worker got it first).
const claimRetryPause = 5 * time.Millisecond

// claim leases jobs to a worker, waiting up to wait for one to be ready. An
// idle wait proposes nothing: it sleeps on the state machine's change signal
// (and the next delayed job's due time) and proposes a claim only when the
// state holds a job this worker could take.
func (s *Server) claim(ctx context.Context, a claimArgs) ([]*store.Job, error) {
	s.lastPoll.Store(a.cmd.WorkerID, time.Now())
	defer s.lastPoll.Store(a.cmd.WorkerID, time.Now())
	deadline := time.Now().Add(a.wait)
	for {
		changed := s.state.Changed()
		if a.anyQueue {
			a.cmd.Queues = s.allQueues()
		}
		finished := s.claimsFinished()
		ready := s.state.ClaimableCount(a.cmd.WorkerID, a.cmd.Queues, a.cmd.Types, a.cmd.Shell, s.now())
		if ready > 0 && s.claiming.acquire(ready) {
			res, err := s.propose(ctx, fsm.Cmd{Op: fsm.OpClaim, Claim: &a.cmd})
			s.claiming.release()
			if err != nil {
				return nil, err
			}
			if len(res.Jobs) > 0 {
				s.jobsClaimed(ctx, res.Jobs, res.Held)
				return res.Jobs, nil
			}
			changed = nil // lost a race: pause briefly rather than spin
		}
		left := time.Until(deadline)
		if left <= 0 || !s.node.IsLeader() || s.isDraining() {
			return nil, nil
		}
		timer := time.NewTimer(min(left, s.untilNextDue(changed == nil)))
		select {
		case <-s.draining:
			timer.Stop()
			return nil, nil
		case <-changed:
		case <-finished: // a claim in flight ended: the jobs it left may be ours
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, nil
		}
		timer.Stop()
	}
}

// claimGate keeps the long-polls of one leader from sending many more
// claims than there are jobs: when a job arrives every parked worker wakes,
// but only as many claims as there are claimable jobs go out at once; the
// others wait for one of them to finish, then look again.
type claimGate struct {
	inflight atomic.Int64
	mu       sync.Mutex
	done     chan struct{} // closed when a claim in flight finishes
}

// acquire takes a slot if fewer than ready claims are in flight.
func (g *claimGate) acquire(ready int) bool {
	for {
		n := g.inflight.Load()
		if n >= int64(ready) {
			return false
		}
		if g.inflight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release frees a slot and wakes the polls waiting for one.
func (g *claimGate) release() {
	g.inflight.Add(-1)
	g.mu.Lock()
	if g.done != nil {
		close(g.done)
		g.done = nil
	}
	g.mu.Unlock()
}

// claimsFinished returns a channel closed when the next claim in flight
// finishes.
func (s *Server) claimsFinished() <-chan struct{} {
	g := &s.claiming
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done == nil {
		g.done = make(chan struct{})
	}
	return g.done
}

// untilNextDue is how long to sleep before the next delayed job is due.
func (s *Server) untilNextDue(lostRace bool) time.Duration {
	if lostRace {
		return claimRetryPause
	}
	d := time.Second // re-check leadership now and then
	if due := s.state.NextDue(); due != 0 {
		d = min(d, max(time.Duration(due-s.now()), time.Millisecond))
	}
	return d
}

// handleClaim leases up to Max jobs to a worker (POST /jobs/claim),
// ending the attempts whose reports it carries in the same round trip.
func (s *Server) handleClaim(w http.ResponseWriter, r *http.Request) {
	var req wire.ClaimRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	args, err := s.claimArgs(&req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	fc := s.fenceFields(r)
	fc.claim(&args.cmd, true, req.ClaimSeq)
	var reports func() []wire.BatchReportResult
	if len(req.Reports) > 0 {
		reps, err := batchReports(req.Reports)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		for _, rep := range reps {
			fc.report(rep)
		}
		// Proposed now, beside the claim: one log entry carries both.
		reports = s.startReports(r.Context(), reps)
	}
	jobs, err := s.boundedClaim(r.Context(), args)
	out := wire.ClaimResponse{LeaseTTLMillis: s.cfg.LeaseTTL.Milliseconds()}
	if reports != nil {
		out.Reports = reports()
	}
	if err != nil && out.Reports == nil {
		s.fail(w, r, err)
		return
	}
	out.Jobs = toWireList(jobs, s.now())
	writeJSON(w, http.StatusOK, out)
}

// handleNext is the seed's claim: GET /jobs/next?worker_id=W[&wait=][&queue=].
// Without a queue it serves every queue, "default" first.
func (s *Server) handleNext(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := wire.ClaimRequest{WorkerID: q.Get("worker_id"), Wait: q.Get("wait"), Shell: true}
	if queue := q.Get("queue"); queue != "" {
		req.Queues = []string{queue}
	}
	args, err := s.claimArgs(&req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if args.anyQueue = q.Get("queue") == ""; args.anyQueue {
		args.cmd.Queues = s.allQueues()
	}
	s.fenceFields(r).claim(&args.cmd, false, 0) // the seed's worker gets no lease
	jobs, err := s.boundedClaim(r.Context(), args)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(jobs) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, toWire(jobs[0], s.now()))
}

// allQueues lists the queues a claim from any queue names: "default", then
// those with a job due, the longest-waiting first, wire.MaxQueues in all
// (fsm.AnyQueues).
func (s *Server) allQueues() []string {
	return s.state.AnyQueues(s.now(), wire.MaxQueues)
}
