package api

import (
	"context"
	"sync"
	"time"

	"github.com/workron/workron/fsm"
)

// reapBatch is the most expiries the reaper proposes per pass.
const reapBatch = 512

// reaper is the leader's loop that expires leases past their deadline. It
// only proposes: the FSM re-checks each lease and deadline when it applies,
// so a heartbeat that won the race wins. A new leader waits one lease period
// before its first pass, so workers whose heartbeats were lost to the
// election get a full fresh period.
type reaper struct {
	s *Server
}

func (r *reaper) run(ctx context.Context) {
	every(ctx, r.s.cfg.ReapInterval, func() { r.runOnce(ctx) })
}

// every calls fn once per interval until ctx ends: the shape of the
// leader's periodic loops, whose runOnce tests call directly.
func every(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// runOnce proposes an expiry for every lease past its deadline (up to
// reapBatch) and returns how many the FSM accepted.
func (r *reaper) runOnce(ctx context.Context) int {
	r.s.leaderMu.Lock()
	since := r.s.leaderSince
	r.s.leaderMu.Unlock()
	if time.Since(since) < r.s.cfg.LeaseTTL {
		return 0
	}
	expired := r.s.state.Expired(r.s.now(), reapBatch)
	if len(expired) == 0 {
		return 0
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		accepted int
	)
	for _, l := range expired {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := r.s.propose(ctx, fsm.Cmd{Op: fsm.OpExpire, Expire: &fsm.Expire{JobID: l.JobID, Lease: l.Lease, Draw: draw()}})
			if err != nil {
				return
			}
			r.s.attemptEnded(ctx, res.Jobs[0], true)
			mu.Lock()
			accepted++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return accepted
}
