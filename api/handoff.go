package api

import (
	"context"
	"errors"
	"time"

	"github.com/workron/workron/dispatch"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/raftnode"
	"github.com/workron/workron/store"
)

// Handing a new job to a waiting worker in the entry that creates it: the
// waiters and which of them a submit takes are package dispatch's
// (dispatch.Waiters); this file proposes the submit with their claims and
// answers them.

// parks says whether a long-poll with these arguments, about to wait d,
// may park.
func parks(a *claimArgs, d time.Duration) bool { return dispatch.Parks(&a.cmd, d, a.anyQueue) }

// proposeSubmit proposes a submit of jobs, with the claims of the waiters
// it takes for them behind it in the same entry (submitWithClaims).
func (s *Server) proposeSubmit(ctx context.Context, jobs []fsm.NewJob) (fsm.Result, error) {
	submit := fsm.Cmd{Op: fsm.OpSubmit, Submit: &fsm.Submit{Jobs: jobs}}
	if taken := s.waiters.TakeFor(jobs, s.now()); len(taken) > 0 {
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
func (s *Server) submitWithClaims(ctx context.Context, submit fsm.Cmd, taken []*dispatch.Waiter) (fsm.Result, error) {
	cmds := make([]fsm.Cmd, 1, 1+len(taken))
	cmds[0] = submit
	for _, w := range taken {
		cmds = append(cmds, fsm.Cmd{Op: fsm.OpClaim, Claim: &w.Claim})
	}
	res, err := s.proposeTogether(ctx, cmds)
	for i, w := range taken {
		if err != nil {
			w.Result <- dispatch.Handoff{Err: err}
			continue
		}
		w.Result <- dispatch.Handoff{Res: res[i+1], Err: res[i+1].Err}
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
func (s *Server) handedOff(ctx context.Context, h dispatch.Handoff) (jobs []*store.Job, over bool, err error) {
	switch {
	case h.Err != nil && (nothingDone(h.Err) || errors.Is(h.Err, raftnode.ErrNeedsUpgrade)):
		return nil, false, nil // the entry was not proposed: wait on
	case h.Err != nil:
		return nil, true, h.Err
	case len(h.Res.Jobs) > 0:
		s.jobsClaimed(ctx, h.Res.Jobs, h.Res.Held)
		for _, j := range h.Res.Jobs {
			s.metrics.handedOff.of(j.Queue).Inc()
		}
		return h.Res.Jobs, true, nil
	}
	return nil, false, nil
}
