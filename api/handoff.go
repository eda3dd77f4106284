package api

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/raftnode"
	"github.com/workron/workron/store"
)

// Handing a new job to a waiting worker in the entry that creates it.
//
// A long-poll with nothing to claim parks here (waiters.park). A submit
// whose jobs can run at once takes, for each such job, the longest-parked
// waiter of its queue and proposes that waiter's claim right behind the
// submit, in the same log entry (raftnode's ProposeTogether): the job is
// created and leased in one apply, one commit round from submit to start
// instead of two. The state machine still decides the claim as it would
// any other, after the submit: fencing, limits, pauses and the claim order
// hold, and the claim may get another job, or nothing, in which case the
// waiter goes on waiting.
//
// Only a long-poll whose claim carries a lease and the worker's claim
// number (Claim.Fenced and Claim.Seq: POST /jobs/claim with claim_seq)
// parks. A claim taken by a submit is proposed even if its request ends
// meanwhile, like any claim in flight; its reply is then lost, and the
// worker's next heartbeat names that claim number (claims_from, claims_to)
// so the cluster gives its jobs back at once, the attempt uncounted (see
// fsm's neverReceived). A claim without a number would leave them leased
// until the lease ran out, so it never parks here and claims only itself.

// waiters are the long-polls of this node parked with nothing to claim, in
// the order they parked.
type waiters struct {
	mu     sync.Mutex
	parked []*waiter
}

// waiter is one parked long-poll.
type waiter struct {
	claim  fsm.Claim
	taken  bool         // by a submit, which answers on result
	result chan handoff // buffered, 1
}

// handoff is a taken waiter's claim result, or the error of its entry.
type handoff struct {
	res fsm.Result
	err error
}

// park adds a long-poll with claim c.
func (ws *waiters) park(c fsm.Claim) *waiter {
	w := &waiter{claim: c, result: make(chan handoff, 1)}
	ws.mu.Lock()
	ws.parked = append(ws.parked, w)
	ws.mu.Unlock()
	return w
}

// leave removes w unless a submit took it; false means it was taken and
// its result will arrive on w.result.
func (ws *waiters) leave(w *waiter) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w.taken {
		return false
	}
	ws.parked = slices.DeleteFunc(ws.parked, func(o *waiter) bool { return o == w })
	return true
}

// take removes and returns the longest-parked waiter claiming from queue,
// or nil.
func (ws *waiters) take(queue string) *waiter {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for i, w := range ws.parked {
		if slices.Contains(w.claim.Queues, queue) {
			w.taken = true
			ws.parked = slices.Delete(ws.parked, i, i+1)
			return w
		}
	}
	return nil
}

// parks says whether a long-poll with these arguments may park.
func parks(a *claimArgs) bool {
	return a.wait > 0 && !a.anyQueue && a.cmd.Fenced && a.cmd.Seq != 0
}

// maxHandoffs is the most waiters one submit takes: its entry holds their
// claims, and an entry holds at most raftnode's MaxBatch commands (512 by
// default).
const maxHandoffs = 64

// takeWaiters takes a parked waiter for each job that can start as soon as
// it exists (no dependencies, not delayed), for up to maxHandoffs jobs.
func (s *Server) takeWaiters(jobs []fsm.NewJob) []*waiter {
	var out []*waiter
	now := s.now()
	for i := 0; i < len(jobs) && len(out) < maxHandoffs; i++ {
		nj := &jobs[i]
		if len(nj.DependsOn) > 0 || nj.RunAt > now {
			continue
		}
		w := s.waiters.take(nj.Queue)
		if w == nil {
			continue
		}
		out = append(out, w)
	}
	return out
}

// proposeSubmit proposes a submit of jobs, with the claims of the waiters
// it takes for them behind it in the same entry (submitWithClaims).
func (s *Server) proposeSubmit(ctx context.Context, jobs []fsm.NewJob) (fsm.Result, error) {
	submit := fsm.Cmd{Op: fsm.OpSubmit, Submit: &fsm.Submit{Jobs: jobs}}
	if taken := s.takeWaiters(jobs); len(taken) > 0 {
		return s.submitWithClaims(ctx, submit, taken)
	}
	return s.propose(ctx, submit)
}

// submitWithClaims proposes submit with the claims of the taken waiters
// behind it in one entry, answers each waiter, and returns the submit's
// result as propose would. A group refused because a claim needs a newer
// protocol than the cluster runs now (a member older than this node's
// view when the waiter made its claim) does not cost the submit: the
// waiters wait on, and the submit is proposed alone.
func (s *Server) submitWithClaims(ctx context.Context, submit fsm.Cmd, taken []*waiter) (fsm.Result, error) {
	cmds := make([]fsm.Cmd, 1, 1+len(taken))
	cmds[0] = submit
	for _, w := range taken {
		cmds = append(cmds, fsm.Cmd{Op: fsm.OpClaim, Claim: &w.claim})
	}
	res, err := s.proposeTogether(ctx, cmds)
	for i, w := range taken {
		if err != nil {
			w.result <- handoff{err: err}
			continue
		}
		w.result <- handoff{res: res[i+1], err: res[i+1].Err}
	}
	var ue *raftnode.NeedsUpgradeError
	if errors.As(err, &ue) && ue.Op != submit.Op {
		return s.propose(ctx, submit)
	}
	if err != nil {
		return fsm.Result{}, err
	}
	return res[0], res[0].Err
}

// handedOff is what a taken waiter's long-poll makes of its claim's
// result: whether the poll is over, with its jobs or error.
func (s *Server) handedOff(ctx context.Context, h handoff) (jobs []*store.Job, over bool, err error) {
	switch {
	case h.err != nil && (nothingDone(h.err) || errors.Is(h.err, raftnode.ErrNeedsUpgrade)):
		return nil, false, nil // the entry was not proposed: wait on
	case h.err != nil:
		return nil, true, h.err
	case len(h.res.Jobs) > 0:
		s.jobsClaimed(ctx, h.res.Jobs, h.res.Held)
		for _, j := range h.res.Jobs {
			s.metrics.handedOff.of(j.Queue).Inc()
		}
		return h.res.Jobs, true, nil
	}
	return nil, false, nil
}
