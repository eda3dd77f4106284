package raftnode

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/workron/workron/fsm"
)

// proposal is one command, or several that must share a log entry, waiting
// for their results.
type proposal struct {
	cmds    []fsm.Cmd    // in the order they apply; one unless ProposeTogether
	done    chan outcome // buffered, 1
	queued  time.Time    // when it was enqueued, for the queue stage
	follows bool         // ProposeAll's proposals after its first: the same caller's
}

// outcome answers a proposal: a result per command, or an error for all.
type outcome struct {
	res []fsm.Result
	err error
}

func newProposal(cmds ...fsm.Cmd) *proposal {
	return &proposal{cmds: cmds, done: make(chan outcome, 1)}
}

// Propose packs cmd with other pending commands into one log entry, waits
// until the entry is applied, and returns the command's result. A rejection
// by the FSM is returned both in Result.Err and as the error.
//
// On ErrNotLeader or ErrNotCommitted nothing was applied and the caller may
// retry elsewhere or later. On ErrNeedsUpgrade (a command newer than some
// member runs, see SetMemberProtocols) nothing was applied either; a
// command above protocol 1 first waits while a member's protocol is not
// known yet (see AwaitProtocol). On
// ErrUnknownOutcome (ctx ended, leadership was lost or the node shut down
// after the entry was handed to Raft) the command may or may not have been
// applied.
func (n *Node) Propose(ctx context.Context, cmd fsm.Cmd) (fsm.Result, error) {
	if n.raft.State() != raft.Leader {
		return fsm.Result{}, ErrNotLeader
	}
	p := newProposal(cmd)
	n.awaitProtocolFor(ctx, p)
	if err := n.enqueue(ctx, p); err != nil {
		return fsm.Result{}, err
	}
	res, err := n.await(ctx, p)
	if err != nil {
		return fsm.Result{}, err
	}
	return res[0], res[0].Err
}

// ProposeTogether proposes cmds in one log entry, in this order, with no
// other command between them, so that the state machine applies them in
// one go: a submit followed by the claim of a worker waiting for its queue
// leases the job in the same apply that creates it. Each command is still
// decided by the state machine on its own, as if proposed alone right
// after the one before it. Other proposals may share the entry before or
// after the group.
//
// The error is the group's, with Propose's meanings: on it no result is
// given, and the commands were applied all or none. Otherwise results[i]
// is cmds[i]'s, a rejection by the FSM in results[i].Err. More commands
// than Config.MaxBatch are refused with ErrNotCommitted.
func (n *Node) ProposeTogether(ctx context.Context, cmds []fsm.Cmd) ([]fsm.Result, error) {
	if len(cmds) == 0 {
		return nil, nil
	}
	if len(cmds) > n.cfg.MaxBatch {
		return nil, fmt.Errorf("%w: %d commands to propose together, more than MaxBatch (%d)", ErrNotCommitted, len(cmds), n.cfg.MaxBatch)
	}
	if n.raft.State() != raft.Leader {
		return nil, ErrNotLeader
	}
	p := newProposal(cmds...)
	n.awaitProtocolFor(ctx, p)
	if err := n.enqueue(ctx, p); err != nil {
		return nil, err
	}
	return n.await(ctx, p)
}

// ProposeAll proposes cmds at once, so they pack into as few entries as
// the proposer makes of them, and waits for each: results[i] and errs[i]
// are what Propose would have returned for cmds[i]. It saves a goroutine
// per command to callers with many (a batch of reports).
// The proposer counts them as one caller's (runProposer).
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
		ps[i] = newProposal(cmd)
		ps[i].follows = i > 0
		n.awaitProtocolFor(ctx, ps[i])
		if errs[i] = n.enqueue(ctx, ps[i]); errs[i] != nil {
			ps[i] = nil
		}
	}
	for i, p := range ps {
		if p == nil {
			continue
		}
		res, err := n.await(ctx, p)
		if errs[i] = err; err == nil {
			results[i], errs[i] = res[0], res[0].Err
		}
	}
	return results, errs
}

// enqueue hands p to the proposer, or says why it could not.
func (n *Node) enqueue(ctx context.Context, p *proposal) error {
	p.queued = time.Now()
	select {
	case n.proposals <- p:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrNotCommitted, ctx.Err())
	case <-n.shutdownCh:
		return ErrShutdown
	}
}

// await waits for an enqueued proposal's outcome: a result per command,
// or the error of them all. A proposal can land in the queue just after
// the proposer drained it and stopped (enqueue raced the shutdown); once
// the proposer has stopped, await drains the queue itself, answering
// ErrShutdown to whatever it finds, p included. A proposal the proposer
// handed to Raft is answered by Raft.
func (n *Node) await(ctx context.Context, p *proposal) ([]fsm.Result, error) {
	stopped := n.proposerDone
	for {
		select {
		case o := <-p.done:
			return o.res, o.err
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrUnknownOutcome, ctx.Err())
		case <-stopped:
			n.drainProposals(nil)
			stopped = nil // drained once: what is left to answer is Raft's
		}
	}
}

// runProposer gathers proposals into entries and hands them to Raft, at
// most MaxInflight at once. An entry holds at most MaxBatch commands, and a
// group (ProposeTogether) is never split: one that does not fit waits for
// the next entry.
//
// An entry goes out at once when nothing is in flight, or when the last
// entry carried one caller's commands: callers come one at a time, and a
// command gains nothing from waiting. Once the last entry carried several
// callers' commands, an entry goes out beside one in flight only when it is
// worth its own log write and apply transaction on every node: when it is
// full (MaxBatch commands, a group that did not fit, or commands that
// submit MaxBatch jobs together: a batch submit), or when it has already
// waited for one entry in flight to finish. Otherwise it keeps gathering
// until an entry finishes, so the commands that arrive meanwhile share one
// entry, and none waits for more than one entry. A full entry's apply still
// overlaps the next one's writes. MaxInflight 1 sends nothing beside an
// entry in flight.
//
// At shutdown the proposals gathered or queued are answered ErrShutdown;
// Raft answers the entries in flight, before it stops (Shutdown).
func (n *Node) runProposer() {
	defer close(n.proposerDone)
	freed := make(chan struct{}, n.cfg.MaxInflight) // an entry in flight is done
	inflight, crowded := 0, false                   // crowded: the last entry carried several callers'
	var g gathering
	for {
		if g.goesOut(inflight, crowded, &n.cfg) {
			g.takeQueued(n.proposals, n.cfg.MaxBatch)
			if n.submitEntry(g.batch, freed) {
				inflight++
			}
			next := g.next
			crowded, g = g.callers > 1, gathering{}
			g.add(next, n.cfg.MaxBatch)
			continue
		}
		var queue <-chan *proposal // nil, so not read, while a proposal waits in next
		if g.next == nil {
			queue = n.proposals
		}
		select {
		case p := <-queue:
			g.add(p, n.cfg.MaxBatch)
		case <-freed:
			inflight--
			g.waited = len(g.batch) > 0
		case <-n.shutdownCh:
			fail(g.batch, ErrShutdown)
			n.drainProposals(g.next)
			return
		}
	}
}

// gathering is the entry the proposer is filling.
type gathering struct {
	batch   []*proposal
	cmds    int       // commands in batch
	jobs    int       // jobs that batch's commands submit
	callers int       // proposals in batch that do not follow another
	next    *proposal // taken from the queue, but did not fit batch
	waited  bool      // an entry in flight finished while batch waited
}

// add puts p in the batch, or in next if it does not fit a batch that is
// not empty. A nil p adds nothing.
func (g *gathering) add(p *proposal, maxBatch int) {
	switch {
	case p == nil:
	case len(g.batch) > 0 && g.cmds+len(p.cmds) > maxBatch:
		g.next = p
	default:
		g.batch, g.cmds = append(g.batch, p), g.cmds+len(p.cmds)
		if !p.follows {
			g.callers++
		}
		for _, c := range p.cmds {
			if c.Op == fsm.OpSubmit && c.Submit != nil {
				g.jobs += len(c.Submit.Jobs)
			}
		}
	}
}

// goesOut reports whether the entry goes to Raft now, with inflight
// entries in flight and crowded if the last entry carried several callers'
// commands (runProposer's rule).
func (g *gathering) goesOut(inflight int, crowded bool, cfg *Config) bool {
	switch {
	case len(g.batch) == 0 || inflight >= cfg.MaxInflight:
		return false
	case inflight == 0 || !crowded || g.waited:
		return true
	}
	return g.next != nil || g.cmds >= cfg.MaxBatch || g.jobs >= cfg.MaxBatch // full
}

// takeQueued adds what is queued now, without waiting, until a proposal
// does not fit.
func (g *gathering) takeQueued(queue <-chan *proposal, maxBatch int) {
	for g.next == nil && g.cmds < maxBatch {
		select {
		case p := <-queue:
			g.add(p, maxBatch)
		default:
			return
		}
	}
}

// submitEntry stamps the time, hands the entry to Raft, and fans the results
// out from a goroutine that sends on freed when Raft is done. It reports
// whether the entry went to Raft: commands that need a newer protocol than
// the cluster runs are refused first (refuseNewer), and an entry that cannot
// be encoded is refused whole.
func (n *Node) submitEntry(batch []*proposal, freed chan<- struct{}) bool {
	if batch = n.refuseNewer(batch); len(batch) == 0 {
		return false
	}
	e := fsm.Entry{Now: n.clock.Now().UnixNano()}
	for _, p := range batch {
		e.Cmds = append(e.Cmds, p.cmds...)
	}
	data, err := fsm.Encode(&e)
	if err != nil {
		fail(batch, fmt.Errorf("raftnode: %w", err))
		return false
	}
	start := time.Now()
	for _, p := range batch {
		n.stages.observe(stageQueue, start.Sub(p.queued))
	}
	n.stages.proposing.Add(1)
	n.applying.Add(1) // before the future exists: Shutdown waits for it
	fut := n.raft.Apply(data, n.cfg.ApplyTimeout)
	n.metrics.observeEntry(len(e.Cmds))
	go func() {
		defer func() { freed <- struct{}{} }()
		defer n.applying.Done()
		defer n.stages.proposing.Add(-1)
		if err := fut.Error(); err != nil {
			fail(batch, mapApplyError(err))
			return
		}
		n.stages.done(fut.Index(), start, time.Now())
		n.metrics.apply.Observe(time.Since(start).Seconds())
		res, ok := fut.Response().([]fsm.Result)
		if !ok || len(res) != len(e.Cmds) {
			fail(batch, fmt.Errorf("raftnode: entry %d applied with %d results for %d commands", fut.Index(), len(res), len(e.Cmds)))
			return
		}
		for _, p := range batch {
			p.done <- outcome{res: res[:len(p.cmds):len(p.cmds)]}
			res = res[len(p.cmds):]
		}
	}()
	return true
}

func fail(batch []*proposal, err error) {
	for _, p := range batch {
		p.done <- outcome{err: err}
	}
}

// drainProposals answers whatever is still queued at shutdown, and next
// if it is not nil.
func (n *Node) drainProposals(next *proposal) {
	if next != nil {
		next.done <- outcome{err: ErrShutdown}
	}
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
