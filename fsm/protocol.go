package fsm

// Protocol versions.
//
// A protocol version names what a binary can apply: protocol 1 is every
// release before protocol versions existed (the op codes of encoding
// version 2 and the JSON entries of version 1); each later protocol adds
// ops or op codes, listed in opProtocol. A node's binary understands
// ProtocolVersion and every lower one. The leader proposes a command only
// when every member of the cluster runs a protocol at least the command's
// (raftnode gates on it), so an older node is never sent an entry it would
// stop at, and a rolling upgrade can pause or roll back while the cluster
// is mixed.

// opProtocol is the least protocol a node needs to apply an op; an op not
// listed needs protocol 1. Append only: an op's protocol never changes.
var opProtocol = map[Op]int{
	OpRetryDependents: 2,
	OpForgetWorker:    2,
	OpSetQueueLimits:  2,
	OpPruneBuckets:    3,

	OpCancelChunked:          ProtocolCascade,
	OpRetryDependentsChunked: ProtocolCascade,
	OpWorkerOfflineChunked:   ProtocolCascade,
	OpForceDrainChunked:      ProtocolCascade,
	OpContinueCascade:        ProtocolCascade,
	OpLiftPauses:             ProtocolPauses,
	OpBulkStart:              ProtocolBulk,
	OpBulkStep:               ProtocolBulk,
	OpBulkStop:               ProtocolBulk,
	OpRecordStep:             ProtocolSteps,
	OpSleepStep:              ProtocolDurable,
	OpWaitStep:               ProtocolDurable,
	OpInvokeStep:             ProtocolDurable,
	OpSendEvent:              ProtocolDurable,
}

// protocol is the least protocol a node needs to apply op.
func (op Op) protocol() int {
	if p, ok := opProtocol[op]; ok {
		return p
	}
	return 1
}

// Protocol is the least protocol a node needs to apply c: its op's, or
// ProtocolFence, ProtocolFlow or ProtocolProgress when it sets a field of that protocol (written with an op
// code or name newer than its op's).
func (c *Cmd) Protocol() int {
	p := c.Op.protocol()
	if c.fenced() {
		p = max(p, ProtocolFence)
	}
	if c.keyed() {
		p = max(p, ProtocolFlow)
	}
	if c.fair() {
		p = max(p, ProtocolFair)
	}
	if c.Op == OpReport && c.Report != nil && c.Report.backpressure() {
		p = max(p, ProtocolBackpressure)
	}
	if c.progressed() {
		p = max(p, ProtocolProgress)
	}
	if c.pauseRules() {
		p = max(p, ProtocolPauses)
	}
	if c.traced() {
		p = max(p, ProtocolTrace)
	}
	if c.chunked() {
		p = max(p, ProtocolCascade)
	}
	if c.capped() {
		p = max(p, ProtocolWorkerCap)
	}
	if c.Op == OpClaim && c.Claim != nil && c.Claim.Ack {
		p = max(p, ProtocolAck)
	}
	if c.bounded() {
		p = max(p, ProtocolClaimBytes)
	}
	if c.kept() {
		p = max(p, ProtocolKeepFailed)
	}
	if c.scheduleCapped() {
		p = max(p, ProtocolScheduleCap)
	}
	return p
}

// ProtocolFair is the protocol of fairness within a queue (issue #17): a
// Claim's Fair (op code opClaimFair) and a queue's KeyWeights (op name
// setQueueLimitsWeighted).
const ProtocolFair = 3

// ProtocolBackpressure is the protocol of a report's RateLimitedFor and
// SnoozeFor (op code opReport3).
const ProtocolBackpressure = 3

// fair reports whether c sets a field of ProtocolFair.
func (c *Cmd) fair() bool {
	switch {
	case c.Op == OpClaim && c.Claim != nil:
		return c.Claim.Fair
	case c.Op == OpSetQueueLimits && c.QueueLimits != nil:
		return len(c.QueueLimits.Limits.KeyWeights) > 0
	}
	return false
}

// backpressure reports whether r sets a field of ProtocolBackpressure,
// which Encode then writes with op code opReport3.
func (r *Report) backpressure() bool { return r.RateLimitedFor != 0 || r.SnoozeFor != 0 }

// ProtocolFlow is the protocol of flow control (issue #17): op
// set_queue_limits and a submit's concurrency keys (op code opSubmitKeyed).
const ProtocolFlow = 2

// keyed reports whether c carries a job with a ConcurrencyKey: a submit
// (written with opSubmitKeyed), or a gang or schedule, which the FSM then
// refuses; either way no node older than ProtocolFlow is sent it.
func (c *Cmd) keyed() bool {
	switch {
	case c.Op == OpSubmit && c.Submit != nil:
		return c.Submit.keyed()
	case c.Op == OpSubmitGang && c.SubmitGang != nil:
		return c.SubmitGang.Job.ConcurrencyKey != ""
	case c.Op == OpPutSchedule && c.PutSchedule != nil:
		return c.PutSchedule.Job.ConcurrencyKey != ""
	}
	return false
}

// keyed reports whether a job of s has a ConcurrencyKey, which Encode then
// writes with op code opSubmitKeyed.
func (s *Submit) keyed() bool {
	for i := range s.Jobs {
		if s.Jobs[i].ConcurrencyKey != "" {
			return true
		}
	}
	return false
}

// ProtocolTrace is the protocol of traces (issue #19): a submit whose jobs
// carry a TraceParent (op code opSubmitTraced), and a gang or a fire that
// carries one (op names of tracedJSONOps).
const ProtocolTrace = 3

// traced reports whether c carries a trace: a submit with a job's
// TraceParent, which Encode then writes with opSubmitTraced, or a gang's
// or a fire's, which it writes under the op name tracedJSONOps gives.
func (c *Cmd) traced() bool {
	switch {
	case c.Op == OpSubmit && c.Submit != nil:
		return c.Submit.traced()
	case c.Op == OpSubmitGang && c.SubmitGang != nil:
		return c.SubmitGang.Job.TraceParent != ""
	case c.Op == OpFire && c.Fire != nil:
		return c.Fire.TraceParent != ""
	}
	return false
}

// traced reports whether a job of s has a TraceParent.
func (s *Submit) traced() bool {
	for i := range s.Jobs {
		if s.Jobs[i].TraceParent != "" {
			return true
		}
	}
	return false
}

// fenced reports whether c sets a field of ProtocolFence, which Encode
// then writes with the newer op code or name (encoding.go).
func (c *Cmd) fenced() bool {
	switch c.Op {
	case OpClaim:
		return c.Claim != nil && c.Claim.fenced()
	case OpHeartbeat:
		return c.Heartbeat != nil && c.Heartbeat.fenced()
	case OpWorkerHeartbeat:
		return c.WorkerHeartbeat != nil && c.WorkerHeartbeat.fenced()
	case OpReport:
		return c.Report != nil && c.Report.fenced()
	}
	return c.fenceToken() != ""
}

func (c *Claim) fenced() bool           { return c.Token != "" || c.Fenced || c.Seq != 0 }
func (h *Heartbeat) fenced() bool       { return h.Token != "" }
func (h *WorkerHeartbeat) fenced() bool { return h.Token != "" || h.ClaimsFrom != 0 || h.ClaimsTo != 0 }
func (r *Report) fenced() bool          { return r.Token != "" }

// Protocol is the least protocol a node needs to apply e: the highest of
// its commands', and at least 1.
func (e *Entry) Protocol() int {
	p := 1
	for i := range e.Cmds {
		p = max(p, e.Cmds[i].Protocol())
	}
	return p
}
