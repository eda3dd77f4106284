package fsm

// Acknowledged attempts (issue #28).
//
// A claim starts an attempt before its worker has it: the reply may be
// lost, or the worker may freeze (SIGSTOP, a hung host whose TCP
// connections stay open) before it runs anything. Charging that attempt
// fails a job of max_attempts 1 that never ran while another worker
// waited. So a claim of ProtocolAck (Claim.Ack) marks each attempt it
// starts as awaiting acknowledgement (store.Job.AwaitingAck), and the
// worker acknowledges it by naming it: a job heartbeat, a worker heartbeat
// that lists it, or its report (which ends it). A worker heartbeat that
// lists nothing renews every lease the worker holds but does not
// acknowledge them: it says the worker lives, not which claim replies it
// received. An attempt that ends by the cluster's hand while it still
// awaits acknowledgement (its lease expires, it times out, its worker is
// declared offline) goes back to pending at once without counting: its
// history keeps it as returned and expired, its error saying so, and its
// number is used again.
//
// The rule rides on the claim: the leader proposes Ack only once every
// member runs ProtocolAck, and a node of an older protocol stops at such a
// claim, so every node that meets AwaitingAck set applies the rule, and an
// expiry (of whatever op code) applies alike everywhere. Attempts claimed
// without Ack keep the old rule: their expiry counts.
//
// MaxUnacked bounds it: a job whose attempts keep ending unacknowledged
// (one that kills its worker at once, or whose worker never heartbeats
// within the lease) has every later one counted, so it cannot run forever
// uncharged. Gang tasks and cancelling jobs are left to the old rule.

import (
	"fmt"

	"github.com/workron/workron/store"
)

// ProtocolAck is the protocol of acknowledged attempts: a claim whose Ack
// is set (op code opClaimAck).
const ProtocolAck = 4

// opClaimAck is the op code of a claim of ProtocolAck: the claim as it is
// written without Ack, its own op code included, follows.
const opClaimAck byte = 23

// MaxUnacked is how many attempts of a job, over its life, may end
// unacknowledged without counting; those after count as any other.
const MaxUnacked = 3

// returnUnacked ends j's expiring attempt without counting it when its
// worker never acknowledged it and the job's MaxUnacked allows: the job is
// pending again at once. It reports whether it did; j was unindexed while
// its status was prev.
func (a *applier) returnUnacked(j *store.Job, prev store.Status, e attemptEnd) bool {
	if !e.expired || prev != store.StatusRunning || !j.AwaitingAck || j.GangID != "" || j.Unacked >= MaxUnacked {
		return false
	}
	j.Unacked++
	msg := fmt.Sprintf("unacknowledged, not counted (%d of %d): %s", j.Unacked, MaxUnacked, e.msg)
	a.endAttempt(j, store.StatusReturned, tail(msg, MaxOutput), true)
	j.Status = store.StatusPending
	j.Attempts--
	j.RunAt = min(j.RunAt, a.now)
	a.put(j, prev)
	return true
}

// acknowledge records that j's worker named its running attempt. It
// reports whether j changed (then the caller writes it).
func acknowledge(j *store.Job) bool {
	if !j.AwaitingAck {
		return false
	}
	j.AwaitingAck = false
	return true
}

// claimAck reads a claim of op code opClaimAck: the claim's own op code and
// argument, then marks it Ack.
func (r *entryReader) claimAck(c *Cmd) {
	if ProtocolVersion < ProtocolAck { // as a binary before the code
		r.Fail(fmt.Sprintf("unknown op code %d (written by a newer Workron?)", opClaimAck))
		return
	}
	code := r.Byte()
	if code == opClaimAck {
		r.Fail(fmt.Sprintf("op code %d twice", opClaimAck))
		return
	}
	r.cmdOf(c, code)
	if r.Err() != nil {
		return
	}
	if c.Op != OpClaim || c.Claim == nil {
		r.Fail(fmt.Sprintf("op code %d followed by %q, not a claim", opClaimAck, c.Op))
		return
	}
	c.Claim.Ack = true
}
