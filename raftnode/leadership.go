package raftnode

import (
	"context"
	"time"
)

// runLeadership reacts to leadership changes: on gaining it, a Barrier (so
// the state machine has every committed entry), then OnLeader under a
// context that is cancelled on losing it.
func (n *Node) runLeadership() {
	defer close(n.leaderDone)
	var run *leaderRun
	defer func() { run.stop() }()
	for {
		select {
		case <-n.shutdownCh:
			return
		case <-n.restored:
			if run != nil {
				n.logger.Info("state restored: restarting the leader's loops")
				run.stop()
				run = startLeaderRun(n.cfg.OnLeader)
			}
		case leader := <-n.notifyCh:
			if !leader {
				n.logger.Info("lost leadership")
				run.stop()
				run = nil
				continue
			}
			if run != nil {
				continue
			}
			n.logger.Info("gained leadership")
			term := n.raft.CurrentTerm()
			if err := n.raft.Barrier(n.cfg.ApplyTimeout).Error(); err != nil {
				n.logger.Warn("barrier after election failed", "err", err)
				continue
			}
			if ahead := n.clock.resync(n.fsm.LastNow()); ahead > clockWarnAhead {
				n.logger.Warn("the log's time is ahead of this node's clock; the cluster time continues from it "+
					"(a node whose clock was ahead led): run_at times and schedules run early by as much until the clocks catch up",
					"ahead", ahead.Round(time.Millisecond).String())
			}
			n.runStagedRestore()
			n.ready.set(term)
			if n.cfg.OnLeader != nil {
				run = startLeaderRun(n.cfg.OnLeader)
			}
		}
	}
}

// leaderRun is one term's leader-only work.
type leaderRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func startLeaderRun(fn func(ctx context.Context)) *leaderRun {
	ctx, cancel := context.WithCancel(context.Background())
	r := &leaderRun{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		fn(ctx)
	}()
	return r
}

// stop cancels the run and waits for it; safe on nil.
func (r *leaderRun) stop() {
	if r == nil {
		return
	}
	r.cancel()
	<-r.done
}
