package fsm

// Cascades in chunks (issue #28). A cascade (the blocked dependents of a
// cancelled or failed job ended, transitively; or those a retried job's
// cascade ended revived) can reach any number of jobs, and one entry that
// changed them all held every other write back for as long as it took.
// A command of ProtocolCascade therefore changes the job it names at once
// and at most CascadeChunk of its dependents; the rest of the walk is
// recorded in the store (store/cascade.go, in snapshots with the rest of
// the state) and the leader's cascade loop (leader/cascade.go) proposes
// continue_cascade, each entry the next chunk, until it is done.
//
// The walk is the one-shot walk's (deps.go), breadth first in the order
// the edges were added, with each job changed as of the entry that started
// it: with no other command in between, the jobs end exactly as one entry
// would have left them (TestCascadeChunkedEqualsOneShot). Meanwhile the
// jobs not yet reached are blocked, waiting for a dependency that is not
// done, so nothing claims them. Each continuation re-checks what it
// visits:
//   - a cancel or failure goes on from a job only while that job is still
//     ended as the cascade left it (the root: failed, cancelled or
//     cancelling); one retried meanwhile keeps the dependents not yet
//     reached, which wait for it again as if the cascade had not come;
//   - a revive goes on from a job only while it is not failed or
//     cancelled, and revives a dependent only as reviveDependents would
//     (revivable), so a job cancelled again meanwhile stops it.
//
// A protocol-3 command (cancel, retry_deps, report, expire, worker_offline,
// force_drain) still cascades in one entry, as every node of protocol 3
// does.

import (
	"errors"

	"github.com/workron/workron/store"
)

// ProtocolCascade is the protocol of cascades in chunks: the op names
// cancel_chunked, retry_deps_chunked, worker_offline_chunked,
// force_drain_chunked and continue_cascade, and a report or expire whose
// Chunked is set (op codes opReportChunked, opExpireChunked).
const ProtocolCascade = 4

// CascadeChunk is the most dependents one entry visits for the cascades it
// starts or continues together; a visit reads one job and may write it.
const CascadeChunk = 1000

// The ops of ProtocolCascade.
const (
	OpCancelChunked          Op = "cancel_chunked"
	OpRetryDependentsChunked Op = "retry_deps_chunked"
	OpWorkerOfflineChunked   Op = "worker_offline_chunked"
	OpForceDrainChunked      Op = "force_drain_chunked"
	OpContinueCascade        Op = "continue_cascade"
)

// ContinueCascade visits the next chunk of the cascade of ID; a cascade
// that is done (or unknown) makes it change nothing.
type ContinueCascade struct {
	ID uint64 `json:"id"`
}

// Op codes of ProtocolCascade (encoding.go), numbered apart from that
// file's list.
const (
	opReportChunked byte = 21
	opExpireChunked byte = 22
)

// chunked reports whether c's cascades go in chunks.
func (c *Cmd) chunked() bool {
	switch c.Op {
	case OpCancelChunked, OpRetryDependentsChunked, OpWorkerOfflineChunked, OpForceDrainChunked:
		return true
	case OpReport:
		return c.Report != nil && c.Report.Chunked
	case OpExpire:
		return c.Expire != nil && c.Expire.Chunked
	}
	return false
}

// startCascade starts a chunked cascade from root, which the caller just
// changed, and visits as much of it as the entry's budget allows. It
// returns the jobs it changed.
func (a *applier) startCascade(kind store.CascadeKind, root *store.Job) []*store.Job {
	c := &store.Cascade{Kind: kind, Root: root.ID, RootStatus: root.Status, Now: a.now}
	a.must(a.tx.NewCascade(c))
	a.must(a.tx.PushCascade(c, root.ID))
	return a.stepCascade(c)
}

// continueCascade applies continue_cascade.
func (a *applier) continueCascade(cc *ContinueCascade) Result {
	c, err := a.tx.GetCascade(cc.ID)
	if errors.Is(err, store.ErrNotFound) {
		return Result{}
	}
	a.must(err)
	a.stepCascade(c)
	return Result{}
}

// stepCascade visits the next dependents of c, within what is left of the
// entry's budget, and stores where it stopped, or deletes c when done.
func (a *applier) stepCascade(c *store.Cascade) []*store.Job {
	var out []*store.Job
	for a.cascadeSpent < CascadeChunk {
		id, ok := a.tx.CascadeHead(c)
		if !ok {
			break
		}
		p, err := a.job(id)
		if err != nil || !a.cascadesFrom(c, p) {
			a.cascadeSpent++ // a skip is a read
			a.must(a.tx.PopCascade(c))
			continue
		}
		limit := CascadeChunk - a.cascadeSpent
		ids, seqs := a.tx.DependentsAfter(p.Seq, c.After, limit)
		for i, did := range ids {
			a.cascadeSpent++
			c.After = seqs[i]
			if d, err := a.job(did); err == nil && a.cascadeVisit(c, p, d) {
				c.Changed++
				a.must(a.tx.PushCascade(c, d.ID))
				out = append(out, d)
			}
		}
		if len(ids) < limit {
			a.must(a.tx.PopCascade(c))
		}
	}
	if _, ok := a.tx.CascadeHead(c); !ok {
		a.must(a.tx.DeleteCascade(c))
	} else {
		a.must(a.tx.PutCascade(c))
	}
	return out
}

// cascadeStatus is the status a cancel or failure cascade ends jobs with.
func cascadeStatus(k store.CascadeKind) store.Status {
	if k == store.CascadeFail {
		return store.StatusFailed
	}
	return store.StatusCancelled
}

// cascadesFrom reports whether c goes on from p, one of the jobs it
// reached (or its root); see the package's rules above.
func (a *applier) cascadesFrom(c *store.Cascade, p *store.Job) bool {
	if c.Kind == store.CascadeRevive {
		return p.Status != store.StatusFailed && p.Status != store.StatusCancelled
	}
	if p.ID == c.Root {
		return p.Status == store.StatusFailed || p.Status == store.StatusCancelled || p.Status == store.StatusCancelling
	}
	return p.Status == cascadeStatus(c.Kind)
}

// cascadeVisit changes d, a dependent of p, as the one-shot walk would
// (cascade or reviveDependents in deps.go), as of the cascade's start,
// and reports whether it did.
func (a *applier) cascadeVisit(c *store.Cascade, p, d *store.Job) bool {
	if c.Kind == store.CascadeRevive {
		return a.reviveDependent(d, p.ID, c.Now)
	}
	parent := p.Status
	if p.ID == c.Root {
		parent = c.RootStatus
	}
	return a.endDependent(d, p.ID, parent, cascadeStatus(c.Kind), c.Now)
}

// Cascades lists up to limit cascades under way, oldest first, for the
// leader's cascader.
func (f *FSM) Cascades(limit int) []*store.Cascade {
	var out []*store.Cascade
	_ = f.view(func(tx *store.Tx) error {
		var err error
		out, err = tx.Cascades(limit)
		return err
	})
	return out
}

// maxCascadeLookup bounds the jobs CascadeAbove reads.
const maxCascadeLookup = 64

// CascadeAbove says, for a blocked job while a cascade is under way, which
// cancelled or failed job above it (a dependency, or one of theirs) has a
// cascade yet to reach it: its id and status, sure. When none is found
// within maxCascadeLookup jobs above it but the walk up stopped at that
// bound, it names the root of the oldest cascade under way, not sure (the
// job may or may not lie below it). "" when no cascade is under way or
// none is above the job.
func (f *FSM) CascadeAbove(j *store.Job) (id string, st store.Status, sure bool) {
	if j.Status != store.StatusBlocked {
		return "", "", false
	}
	_ = f.view(func(tx *store.Tx) error {
		cs, err := tx.Cascades(1)
		if err != nil || len(cs) == 0 {
			return err
		}
		queue := append([]string(nil), j.DependsOn...)
		for read := 0; len(queue) > 0; read++ {
			if read == maxCascadeLookup {
				id, st = cs[0].Root, cs[0].RootStatus
				return nil
			}
			h, err := tx.JobHead(queue[0])
			queue = queue[1:]
			if err != nil {
				continue
			}
			switch h.Status {
			case store.StatusCancelled, store.StatusFailed, store.StatusCancelling:
				id, st, sure = h.ID, h.Status, true
				return nil
			case store.StatusBlocked:
				if p, err := tx.Job(h.ID); err == nil {
					queue = append(queue, p.DependsOn...)
				}
			}
		}
		return nil
	})
	return id, st, sure
}
