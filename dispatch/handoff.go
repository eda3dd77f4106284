package dispatch

import (
	"slices"
	"sync"
	"time"

	"github.com/workron/workron/fsm"
)

// Handing a new job to a waiting worker in the entry that creates it.
//
// A long-poll with nothing to claim parks here (Waiters.Park). A submit
// whose jobs can run at once takes, for each such job, the longest-parked
// waiter of its queue (Waiters.TakeFor) and proposes that waiter's claim
// right behind the submit, in the same log entry (raftnode's
// ProposeTogether): the job is created and leased in one apply, one commit
// round from submit to start instead of two. The state machine still
// decides the claim as it would any other, after the submit: fencing,
// limits, pauses and the claim order hold, and the claim may get another
// job, or nothing, in which case the waiter goes on waiting.
//
// Only a long-poll whose claim carries a lease and the worker's claim
// number (Claim.Fenced and Claim.Seq: POST /jobs/claim with claim_seq)
// parks (Parks). A claim taken by a submit is proposed even if its request
// ends meanwhile, like any claim in flight; its reply is then lost, and the
// worker's next heartbeat names that claim number (claims_from, claims_to)
// so the cluster gives its jobs back at once, the attempt uncounted (see
// fsm's neverReceived). A claim without a number would leave them leased
// until the lease ran out, so it never parks here and claims only itself.

// Waiters are the long-polls of this node parked with nothing to claim, in
// the order they parked. The zero Waiters is ready to use.
type Waiters struct {
	mu     sync.Mutex
	parked []*Waiter
	parks  uint64 // calls of Park
}

// Waiter is one parked long-poll.
type Waiter struct {
	// Claim is the poll's claim, proposed by the submit that takes it.
	Claim fsm.Claim
	// Result receives the taken waiter's Handoff, exactly once (buffered).
	Result chan Handoff
	taken  bool // by a submit, which answers on Result
}

// Handoff is a taken waiter's claim result, or the error of its entry.
type Handoff struct {
	Res fsm.Result
	Err error
}

// MaxHandoffs is the most waiters one submit takes: its entry holds their
// claims, and an entry holds at most raftnode's MaxBatch commands (512 by
// default).
const MaxHandoffs = 64

// Parks says whether a long-poll may park: it waits (wait above 0), names
// its queues (not anyQueue), and its claim carries a lease and a claim
// number.
func Parks(c *fsm.Claim, wait time.Duration, anyQueue bool) bool {
	return wait > 0 && !anyQueue && c.Fenced && c.Seq != 0
}

// Park adds a long-poll with claim c.
func (ws *Waiters) Park(c fsm.Claim) *Waiter {
	w := &Waiter{Claim: c, Result: make(chan Handoff, 1)}
	ws.mu.Lock()
	ws.parked = append(ws.parked, w)
	ws.parks++
	ws.mu.Unlock()
	return w
}

// Parks is how many times a long-poll has parked (Park). A poll parks
// once however often it wakes to look again, so that it keeps its place
// and is never off the list while it looks.
func (ws *Waiters) Parks() uint64 {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.parks
}

// Leave removes w unless a submit took it; false means it was taken and
// its result will arrive on w.Result.
func (ws *Waiters) Leave(w *Waiter) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w.taken {
		return false
	}
	ws.parked = slices.DeleteFunc(ws.parked, func(o *Waiter) bool { return o == w })
	return true
}

// Len is how many long-polls are parked.
func (ws *Waiters) Len() int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return len(ws.parked)
}

// take removes and returns the longest-parked waiter claiming from queue,
// or nil.
func (ws *Waiters) take(queue string) *Waiter {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for i, w := range ws.parked {
		if slices.Contains(w.Claim.Queues, queue) {
			w.taken = true
			ws.parked = slices.Delete(ws.parked, i, i+1)
			return w
		}
	}
	return nil
}

// TakeFor takes a parked waiter for each job that can start as soon as it
// exists (no dependencies, not delayed past now, in Unix nanoseconds), for
// up to MaxHandoffs jobs. The caller proposes their claims and answers
// each on its Result.
func (ws *Waiters) TakeFor(jobs []fsm.NewJob, now int64) []*Waiter {
	var out []*Waiter
	for i := 0; i < len(jobs) && len(out) < MaxHandoffs; i++ {
		nj := &jobs[i]
		if len(nj.DependsOn) > 0 || nj.RunAt > now {
			continue
		}
		w := ws.take(nj.Queue)
		if w == nil {
			continue
		}
		out = append(out, w)
	}
	return out
}
