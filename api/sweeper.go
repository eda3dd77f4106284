package api

import (
	"context"

	"github.com/workron/workron/fsm"
)

// sweepBatch is the most jobs one delete command removes.
const sweepBatch = 1000

// sweeper is the leader's loop that deletes finished jobs whose retention ran
// out, in batched commands, so history never grows the replicated state
// without bound. The FSM re-checks each job's expiry when it applies.
type sweeper struct {
	s *Server
}

func (w *sweeper) run(ctx context.Context) {
	every(ctx, w.s.cfg.SweepInterval, func() {
		for n := sweepBatch; n == sweepBatch && ctx.Err() == nil; {
			n = w.runOnce(ctx)
		}
	})
}

// runOnce proposes one delete of up to sweepBatch expired jobs and returns
// how many the FSM removed.
func (w *sweeper) runOnce(ctx context.Context) int {
	ids := w.s.state.ExpiredJobs(w.s.now(), sweepBatch)
	if len(ids) == 0 {
		return 0
	}
	res, err := w.s.propose(ctx, fsm.Cmd{Op: fsm.OpDelete, Delete: &fsm.Delete{IDs: ids}})
	if err != nil {
		w.s.logger.Warn("retention sweep", "err", err)
		return 0
	}
	w.s.logger.Debug("retention sweep", "deleted", res.Deleted)
	return res.Deleted
}
