package api

import (
	"context"
	"net/http"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/dispatch"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// claimRetryPause is how long a long-poll waits after a claim came back
// empty although a job looked ready (another worker got it first).
const claimRetryPause = 5 * time.Millisecond

// claim leases jobs to a worker, waiting up to wait for one to be ready. An
// idle wait proposes nothing: it sleeps on the state machine's change signal
// (and the next delayed job's due time) and proposes a claim only when the
// state holds a job this worker could take. A poll that may park (parks)
// stays parked for a submit's hand-off across its wake-ups, and leaves only
// to claim for itself or to end.
func (s *Server) claim(ctx context.Context, a claimArgs) ([]*store.Job, error) {
	s.live.Heard(a.cmd.WorkerID, time.Now())
	// The end of the poll counts too: a deferred call's arguments are read
	// when it is deferred, so the time is read inside the closure.
	defer func() { s.live.Heard(a.cmd.WorkerID, time.Now()) }()
	deadline := time.Now().Add(a.wait)
	gatedLooks := 0
	var w *dispatch.Waiter // parked, from the first wait on
	for {
		changed := s.state.Changed()
		if a.anyQueue {
			a.cmd.Queues = s.allQueues()
		}
		finished := s.claiming.Finished()
		ready := s.state.ClaimableCount(a.cmd.WorkerID, a.cmd.Queues, a.cmd.Types, a.cmd.Shell, s.now())
		gated := false
		if ready > 0 {
			if jobs, over, err := s.unpark(ctx, &w); over {
				return jobs, err
			}
			if gated = !s.claiming.Acquire(ready); !gated {
				jobs, err := s.claimOnce(ctx, &a)
				if err != nil || len(jobs) > 0 {
					return jobs, err
				}
				changed = nil // lost a race: pause briefly rather than spin
			}
		}
		left := time.Until(deadline)
		if left <= 0 && gated && gatedLooks < maxGatedLooks && s.node.IsLeader() && !s.isDraining() {
			// Jobs are ready but as many claims are in flight, and one of
			// them may already have taken its job (its slot is freed only
			// after its reply): a claim that may not wait still waits for
			// one to finish, then looks again, rather than answer empty
			// beside a ready job.
			gatedLooks++
			if !s.awaitClaimInFlight(ctx, finished) {
				return nil, nil
			}
			continue
		}
		if left <= 0 && a.onReports() {
			// Its reports are still being committed, and the reply waits
			// for them: meanwhile the claim waits as a long-poll does, so
			// a job submitted now is handed to it rather than left for
			// the worker's next poll (a second commit round).
			left = claimInFlightWait
		}
		if left <= 0 || !s.node.IsLeader() || s.isDraining() {
			jobs, _, err := s.unpark(ctx, &w)
			return jobs, err
		}
		jobs, over, err := s.await(ctx, &a, &w, min(left, s.untilNextDue(changed == nil)), changed, finished)
		if over {
			return jobs, err
		}
	}
}

// claimOnce proposes a's claim with a slot of s.claiming taken, and
// frees it; no jobs and no error means another claim got the job first.
func (s *Server) claimOnce(ctx context.Context, a *claimArgs) ([]*store.Job, error) {
	res, err := s.propose(ctx, fsm.Cmd{Op: fsm.OpClaim, Claim: &a.cmd})
	s.claiming.Release()
	if err != nil {
		return nil, err
	}
	if len(res.Jobs) > 0 {
		s.jobsClaimed(ctx, res.Jobs, res.Held)
	}
	return res.Jobs, nil
}

// maxGatedLooks bounds how often a claim that may not wait looks again after
// finding its jobs' claims all in flight (see claim).
const maxGatedLooks = 3

// claimInFlightWait bounds each of those waits: a claim in flight ends
// within a commit round unless the cluster has lost its leader.
const claimInFlightWait = time.Second

// awaitClaimInFlight waits until a claim in flight finishes (finished),
// for at most claimInFlightWait; false if ctx ended or the node drains
// first.
func (s *Server) awaitClaimInFlight(ctx context.Context, finished <-chan struct{}) bool {
	timer := time.NewTimer(claimInFlightWait)
	defer timer.Stop()
	select {
	case <-finished:
		return true
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.draining:
		return false
	}
}

// await is a long-poll's wait for something to claim: a change of the
// state, the end of another claim, d, the answer to the claim's reports,
// or the end of ctx or of the node's serving. It parks the poll in *w, if
// not parked yet, where a submit may take it (handoff.go) and propose its
// claim; the poll stays parked when it wakes for anything else. over says
// the poll ends, with jobs (a submit's claim got them), an error, or
// nothing.
func (s *Server) await(ctx context.Context, a *claimArgs, w **dispatch.Waiter, d time.Duration, changed, finished <-chan struct{}) (jobs []*store.Job, over bool, err error) {
	if *w == nil && parks(a, d) {
		*w = s.waiters.Park(a.cmd)
	}
	var taken <-chan dispatch.Handoff
	if *w != nil {
		taken = (*w).Result
	}
	var reported <-chan struct{} // nil, so not read, once they are answered
	if a.onReports() {
		reported = a.reportsDone
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-s.draining:
		over = true
	case <-changed:
	case <-reported: // the claim's reports are answered: it may end now
	case <-finished: // a claim in flight ended: the jobs it left may be ours
	case <-timer.C:
	case h := <-taken:
		*w = nil // answered: a submit took it off the waiters
		return s.handedOff(ctx, h)
	case <-ctx.Done():
		over = true
	}
	if over {
		jobs, _, err = s.unpark(ctx, w)
		return jobs, true, err
	}
	return nil, false, nil
}

// unpark takes the poll parked in *w (if any) off the waiters and clears
// *w. If a submit took it first, its claim is proposed and is answered even
// if the poll ends now (see handoff.go), within proposeTimeout: the result
// is handedOff's.
func (s *Server) unpark(ctx context.Context, w **dispatch.Waiter) (jobs []*store.Job, over bool, err error) {
	parked := *w
	*w = nil
	if parked == nil || s.waiters.Leave(parked) {
		return nil, false, nil
	}
	return s.handedOff(ctx, <-parked.Result)
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
	var reps []*fsm.Report
	if len(req.Reports) > 0 {
		if reps, err = batchReports(req.Reports); err != nil {
			s.fail(w, r, err)
			return
		}
		for _, rep := range reps {
			fc.report(rep)
		}
	}
	// The reports' traceparents reach the spans of the attempts they end.
	jobs, reports, err := s.claimReporting(s.withReportTraces(r.Context(), req.Reports), args, reps)
	out := wire.ClaimResponse{LeaseTTLMillis: s.cfg.LeaseTTL.Milliseconds(), Reports: reports}
	if err != nil && out.Reports == nil {
		s.fail(w, r, err)
		return
	}
	out.Jobs = toWireList(jobs, s.now())
	s.withParentResults(out.Jobs)
	s.withJournals(out.Jobs, wire.MaxClaimJournalSteps, wire.MaxClaimReplyJournalSteps)
	writeClaimReply(w, http.StatusOK, out)
}

// maxReportsBesideClaim is the most reports a claim carries in the log
// entry of its claim (claimReporting); more are proposed on their own.
const maxReportsBesideClaim = 64

// claimReporting ends the attempts reps report, then claims. When a job is
// ready for the claim at once, the reports and the claim go in one log
// entry, the reports first (ProposeTogether): the worker's round trip
// costs one commit, and the claim sees what the reports freed (a slot of a
// limit, say). Otherwise the reports are proposed at once and the claim
// waits as usual. The reports' results are nil only without reports.
func (s *Server) claimReporting(ctx context.Context, a claimArgs, reps []*fsm.Report) ([]*store.Job, []wire.BatchReportResult, error) {
	if len(reps) == 0 {
		jobs, err := s.boundedClaim(ctx, a)
		return jobs, nil, err
	}
	if len(reps) <= maxReportsBesideClaim {
		ready := s.state.ClaimableCount(a.cmd.WorkerID, a.cmd.Queues, a.cmd.Types, a.cmd.Shell, s.now())
		if ready > 0 && s.claiming.Acquire(ready) {
			return s.reportsThenClaim(ctx, a, reps)
		}
	}
	reports := s.startReports(ctx, reps)
	a.reportsDone = reports.done
	jobs, err := s.boundedClaim(ctx, a)
	return jobs, reports.wait(), err
}

// reportsThenClaim proposes reps and a's claim in one entry, with a slot
// of s.claiming taken; a claim that lost its job to another goes on as
// usual.
func (s *Server) reportsThenClaim(ctx context.Context, a claimArgs, reps []*fsm.Report) ([]*store.Job, []wire.BatchReportResult, error) {
	res, err := s.proposeTogether(ctx, append(reportCmds(reps), fsm.Cmd{Op: fsm.OpClaim, Claim: &a.cmd}))
	s.claiming.Release()
	out := make([]wire.BatchReportResult, len(reps))
	errs := make([]error, len(reps))
	for i := range reps {
		if errs[i] = err; err == nil {
			errs[i] = res[i].Err
		}
	}
	s.reportResults(ctx, reps, res, errs, out)
	if err != nil {
		return nil, out, err
	}
	c := res[len(reps)]
	switch {
	case c.Err != nil:
		return nil, out, c.Err
	case len(c.Jobs) > 0:
		s.jobsClaimed(ctx, c.Jobs, c.Held)
		return c.Jobs, out, nil
	}
	jobs, err := s.boundedClaim(ctx, a)
	return jobs, out, err
}

// handleNext is the v0 worker API's claim: GET /jobs/next?worker_id=W[&wait=][&queue=].
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
	s.fenceFields(r).claim(&args.cmd, false, 0) // a v0 worker gets no lease
	jobs, err := s.boundedClaim(r.Context(), args)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(jobs) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJob(w, http.StatusOK, toWire(jobs[0], s.now()))
}

// allQueues lists the queues a claim from any queue names: "default", then
// those with a job due, the longest-waiting first, wire.MaxQueues in all
// (fsm.AnyQueues).
func (s *Server) allQueues() []string {
	return s.state.AnyQueues(s.now(), wire.MaxQueues)
}
