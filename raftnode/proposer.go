package raftnode

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/workron/workron/fsm"
)

// proposal is one command waiting for its result.
type proposal struct {
	cmd  fsm.Cmd
	done chan outcome // buffered, 1
}

type outcome struct {
	res fsm.Result
	err error
}

// Propose packs cmd with other pending commands into one log entry, waits
// until the entry is applied, and returns the command's result. A rejection
// by the FSM is returned both in Result.Err and as the error.
//
// On ErrNotLeader or ErrNotCommitted nothing was applied and the caller may
// retry elsewhere or later. On ErrNeedsUpgrade (a command newer than some
// member runs, see SetMemberProtocols) nothing was applied either. On
// ErrUnknownOutcome (ctx ended, leadership was lost or the node shut down
// after the entry was handed to Raft) the command may or may not have been
// applied.
func (n *Node) Propose(ctx context.Context, cmd fsm.Cmd) (fsm.Result, error) {
	if n.raft.State() != raft.Leader {
		return fsm.Result{}, ErrNotLeader
	}
	p := &proposal{cmd: cmd, done: make(chan outcome, 1)}
	if err := n.enqueue(ctx, p); err != nil {
		return fsm.Result{}, err
	}
	return p.await(ctx)
}

// ProposeAll proposes cmds at once, so they pack into as few entries as
// the proposer makes of them, and waits for each: results[i] and errs[i]
// are what Propose would have returned for cmds[i]. It saves a goroutine
// per command to callers with many (a batch of reports).
func (n *Node) ProposeAll(ctx context.Context, cmds []fsm.Cmd) (results []fsm.Result, errs []error) {
	results, errs = make([]fsm.Result, len(cmds)), make([]error, len(cmds))
	if n.raft.State() != raft.Leader {
		for i := range errs {
			errs[i] = ErrNotLeader
		}
		return results, errs
	}
	ps := make([]*proposal, len(cmds))
	for i, cmd := range cmds {
		ps[i] = &proposal{cmd: cmd, done: make(chan outcome, 1)}
		if errs[i] = n.enqueue(ctx, ps[i]); errs[i] != nil {
			ps[i] = nil
		}
	}
	for i, p := range ps {
		if p != nil {
			results[i], errs[i] = p.await(ctx)
		}
	}
	return results, errs
}

// enqueue hands p to the proposer, or says why it could not.
func (n *Node) enqueue(ctx context.Context, p *proposal) error {
	select {
	case n.proposals <- p:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrNotCommitted, ctx.Err())
	case <-n.shutdownCh:
		return ErrShutdown
	}
}

// await waits for an enqueued proposal's outcome.
func (p *proposal) await(ctx context.Context) (fsm.Result, error) {
	select {
	case o := <-p.done:
		if o.err == nil && o.res.Err != nil {
			return o.res, o.res.Err
		}
		return o.res, o.err
	case <-ctx.Done():
		return fsm.Result{}, fmt.Errorf("%w: %w", ErrUnknownOutcome, ctx.Err())
	}
}

// runProposer gathers proposals into entries. It hands an entry to Raft as
// soon as one is free of the MaxInflight slots, so under load commands pile
// up while entries are in flight and pack into larger entries.
func (n *Node) runProposer() {
	defer close(n.proposerDone)
	sem := make(chan struct{}, n.cfg.MaxInflight)
	batch := make([]*proposal, 0, n.cfg.MaxBatch)
	for {
		select {
		case sem <- struct{}{}:
		case <-n.shutdownCh:
			n.drainProposals()
			return
		}
		select {
		case p := <-n.proposals:
			batch = append(batch[:0], p)
		case <-n.shutdownCh:
			n.drainProposals()
			return
		}
	gather:
		for len(batch) < n.cfg.MaxBatch {
			select {
			case p := <-n.proposals:
				batch = append(batch, p)
			default:
				break gather
			}
		}
		n.submitEntry(batch, sem)
		batch = make([]*proposal, 0, n.cfg.MaxBatch)
	}
}

// submitEntry stamps the time, hands the entry to Raft, and fans the results
// out from a goroutine that frees the in-flight slot when Raft is done.
// Commands that need a newer protocol than the cluster runs are refused
// first (refuseNewer).
func (n *Node) submitEntry(batch []*proposal, sem chan struct{}) {
	if batch = n.refuseNewer(batch); len(batch) == 0 {
		<-sem
		return
	}
	e := fsm.Entry{Now: n.clock.Now().UnixNano(), Cmds: make([]fsm.Cmd, len(batch))}
	for i, p := range batch {
		e.Cmds[i] = p.cmd
	}
	data, err := fsm.Encode(&e)
	if err != nil {
		<-sem
		fail(batch, fmt.Errorf("raftnode: %w", err))
		return
	}
	start := time.Now()
	fut := n.raft.Apply(data, n.cfg.ApplyTimeout)
	n.metrics.observeEntry(len(batch))
	go func() {
		defer func() { <-sem }()
		if err := fut.Error(); err != nil {
			fail(batch, mapApplyError(err))
			return
		}
		n.metrics.apply.Observe(time.Since(start).Seconds())
		res, ok := fut.Response().([]fsm.Result)
		if !ok || len(res) != len(batch) {
			fail(batch, fmt.Errorf("raftnode: entry %d applied with %d results for %d commands", fut.Index(), len(res), len(batch)))
			return
		}
		for i, p := range batch {
			p.done <- outcome{res: res[i]}
		}
	}()
}

func fail(batch []*proposal, err error) {
	for _, p := range batch {
		p.done <- outcome{err: err}
	}
}

// drainProposals answers whatever is still queued at shutdown.
func (n *Node) drainProposals() {
	for {
		select {
		case p := <-n.proposals:
			p.done <- outcome{err: ErrShutdown}
		default:
			return
		}
	}
}

// mapApplyError sorts Raft's errors into "nothing happened" and "unknown".
func mapApplyError(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return ErrNotLeader
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: %w", ErrNotCommitted, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %w", ErrUnknownOutcome, err)
	default: // ErrLeadershipLost and anything else
		return fmt.Errorf("%w: %w", ErrUnknownOutcome, err)
	}
}
