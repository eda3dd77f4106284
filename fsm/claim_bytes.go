package fsm

import (
	"fmt"

	"github.com/workron/workron/store"
)

// A claim's byte budget (ProtocolClaimBytes).
//
// A claim may lease up to MaxClaim jobs, each of up to a megabyte or so of
// command, payload, env, metadata and last output: a reply of hundreds of
// megabytes. A Claim with MaxBytes set stops taking jobs once the jobs it
// took reach MaxBytes by claimBytes, always taking at least one: the rest
// stay pending, never leased without being handed out. claimBytes reads
// only the stored job, so every node stops at the same job. It is part of
// how a claim of this form applies: changing it takes a new form.
//
// A claim with MaxBytes is written with op code opClaimBounded (after op
// code opClaimAck when it carries Ack), so a node of protocol 3, which
// would lease every job it picks, stops at the entry; the API sets
// MaxBytes (DefaultMaxClaimBytes) only once every node runs
// ProtocolClaimBytes. Claims are the hottest command, so the form is
// binary like the other claims'.

// ProtocolClaimBytes is the protocol of a Claim's MaxBytes.
const ProtocolClaimBytes = 4

// DefaultMaxClaimBytes is the byte budget the API gives a claim's jobs.
const DefaultMaxClaimBytes = 16 << 20

// opClaimBounded is the op code of a claim that carries MaxBytes: as
// opClaimCapped (MaxWorkers may be 0), then MaxBytes.
const opClaimBounded byte = 20

// claimJobOverhead is what claimBytes counts for a job beyond its
// variable fields: its ids, times, numbers and JSON names.
const claimJobOverhead = 512

// claimBytes is what a claim reply carries of j, as a claim's byte budget
// counts it: its variable fields' bytes and claimJobOverhead.
func claimBytes(j *store.Job) int64 {
	n := claimJobOverhead + len(j.ID) + len(j.Command) + len(j.Type) + len(j.Payload) + len(j.Queue) +
		len(j.IdempotencyKey) + len(j.Output) + len(j.LastError) + len(j.Result) + len(j.Schedule) +
		len(j.After) + len(j.GangID) + len(j.ConcurrencyKey) + len(j.TraceParent)
	for k, v := range j.Env {
		n += len(k) + len(v)
	}
	for k, v := range j.Metadata {
		n += len(k) + len(v)
	}
	for _, s := range j.DependsOn {
		n += len(s) + 3
	}
	for _, s := range j.Tags {
		n += len(s) + 3
	}
	for _, a := range j.History {
		n += 128 + len(a.WorkerID) + len(a.Error)
	}
	if j.Progress != nil {
		n += len(j.Progress.Message)
	}
	return int64(n)
}

// bounded reports whether c sets MaxBytes (ProtocolClaimBytes).
func (c *Cmd) bounded() bool {
	return c.Op == OpClaim && c.Claim != nil && c.Claim.MaxBytes != 0
}

// claimBounded reads the rest of a claim of op code opClaimBounded.
func (r *entryReader) claimBounded(c *Cmd) {
	if ProtocolVersion < ProtocolClaimBytes { // as a binary before the code
		r.Fail(fmt.Sprintf("unknown op code %d (written by a newer Workron?)", opClaimBounded))
		return
	}
	c.Op, c.Claim = OpClaim, r.claim()
	c.Claim.Token, c.Claim.Fenced, c.Claim.Seq = r.Str(), r.Bool(), r.Uvarint()
	c.Claim.Fair, c.Claim.MaxWorkers, c.Claim.MaxBytes = r.Bool(), r.Int(), r.Varint()
	if r.Err() == nil && c.Claim.MaxBytes == 0 {
		r.Fail(fmt.Sprintf("claim of op code %d without its byte budget", opClaimBounded))
	}
}
