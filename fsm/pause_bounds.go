package fsm

import (
	"fmt"
	"time"

	"github.com/workron/workron/store"
)

// Bounds on pauses and snoozes (issue #28, ProtocolPauses). Before them a
// rate-limited report of a job without a key paused its whole queue, every
// tenant's jobs, for up to 24h, and nothing ended a pause early; and a job
// could snooze forever without using an attempt. A report of op code
// opReportCapped (Report.Capped, which the API sets once every node runs
// ProtocolPauses) follows these rules instead:
//
//   - rate-limited pauses the job's concurrency key. A job without a key
//     pauses its queue only when the queue's PauseQueue setting is on (off
//     by default); otherwise the job alone waits, as a snooze does.
//   - each pause, and a keyless job's own wait, lasts at most the queue's
//     MaxPause (DefaultMaxPause unless set).
//   - a job held off MaxHoldOffs times in a row (snoozed, rate-limited or
//     returned, the attempt ends that use none) has each further hold-off
//     counted as an attempt: it still waits as asked, but when no attempt
//     is left it fails as an ordinary failure would.
//
// An admin lifts pauses early with op lift_pauses (LiftPauses). Entries of
// the older forms apply as they always did, so that nodes of both releases
// agree during a rolling upgrade.

// ProtocolPauses is the protocol of these bounds: op code opReportCapped,
// op lift_pauses, and a set_queue_limits that sets PauseQueue or MaxPause
// (op name setQueueLimitsPauses).
const ProtocolPauses = 4

// opReportCapped is a report whose Capped is set: opReport3's layout.
const opReportCapped byte = 17

// opReportCappedChunked is a report whose Capped and Chunked are both set
// (a rate-limited or snoozed failure once the cluster runs protocol 4):
// opReport3's layout.
const opReportCappedChunked byte = 18

// setQueueLimitsPauses is the op name of a set_queue_limits whose limits
// set PauseQueue or MaxPause.
const setQueueLimitsPauses Op = "set_queue_limits_p"

// DefaultMaxPause is a queue's MaxPause when it sets none: long enough for
// the usual Retry-After of an API's 429 (seconds to a minute or two), short
// enough that one report cannot stall a key or queue for long. A queue
// whose downstream limits reset more slowly sets its own, up to MaxPause.
const DefaultMaxPause = int64(5 * time.Minute)

// MaxHoldOffs is how many hold-offs in a row a job gets before each further
// one counts as an attempt. It is at most MaxHistory, since the count is
// read from the job's history.
const MaxHoldOffs = 20

const _ = uint(MaxHistory - MaxHoldOffs) // MaxHoldOffs <= MaxHistory

// pauseRules reports whether c sets a field of ProtocolPauses.
func (c *Cmd) pauseRules() bool {
	switch {
	case c.Op == OpReport && c.Report != nil:
		return c.Report.Capped
	case c.Op == OpSetQueueLimits && c.QueueLimits != nil:
		return pauseSettings(&c.QueueLimits.Limits)
	}
	return false
}

// pauseSettings reports whether l sets a queue setting of ProtocolPauses.
func pauseSettings(l *store.QueueLimits) bool { return l.PauseQueue || l.MaxPause != 0 }

// queueLimitsName is the op name Encode writes a set_queue_limits under:
// setQueueLimitsPauses for one of ProtocolPauses, setQueueLimitsWeighted
// for one of ProtocolFair, else its own.
func (c *Cmd) queueLimitsName() Op {
	switch {
	case c.Op != OpSetQueueLimits || c.QueueLimits == nil:
		return c.Op
	case pauseSettings(&c.QueueLimits.Limits):
		return setQueueLimitsPauses
	case c.fair():
		return setQueueLimitsWeighted
	}
	return c.Op
}

// queueLimitsCmd reads a set_queue_limits written under any of its names
// back as the op, and refuses one written under a name Encode would not
// use for it where an older node would drop a field: key weights under
// the plain name are read as they always were.
func (r *entryReader) queueLimitsCmd(c *Cmd) {
	name := c.Op
	c.Op = OpSetQueueLimits
	if c.QueueLimits == nil {
		return // Cmd.valid refuses it
	}
	want := c.queueLimitsName()
	switch {
	case name == setQueueLimitsPauses && want != name:
		r.Fail(fmt.Sprintf("op %q without pause settings", name))
	case name == setQueueLimitsWeighted && want != name:
		r.Fail(fmt.Sprintf("op %q without key weights, or with pause settings", name))
	case name == OpSetQueueLimits && want == setQueueLimitsPauses:
		r.Fail(fmt.Sprintf("op %q with pause settings, not written under %q", name, setQueueLimitsPauses))
	}
}

// checkPauseSettings checks a queue's settings of ProtocolPauses.
func checkPauseSettings(l *store.QueueLimits) error {
	if l.MaxPause < 0 || l.MaxPause > MaxPause {
		return &ValidationError{Field: "max_pause", Reason: "must be from 1ns to 24h"}
	}
	return nil
}

// maxPauseOf is the longest pause a capped report may set in queue q.
func (fx *flowIndex) maxPauseOf(q string) int64 {
	if l := fx.limits[q]; l != nil && l.MaxPause > 0 {
		return l.MaxPause
	}
	return DefaultMaxPause
}

// pausesQueue reports whether a rate-limited job without a key may pause
// queue q.
func (fx *flowIndex) pausesQueue(q string) bool {
	l := fx.limits[q]
	return l != nil && l.PauseQueue
}

// heldOffInARow counts the attempts at the end of a history that used
// none: snoozed, rate-limited or returned.
func heldOffInARow(h []store.Attempt) int {
	n := 0
	for i := len(h) - 1; i >= 0; i-- {
		switch h[i].Status {
		case store.StatusSnoozed, store.StatusRateLimited, store.StatusReturned:
			n++
		default:
			return n
		}
	}
	return n
}

// holdOffCapped is holdOff for a capped report (see the rules above). It
// returns false, with the failure's message, when the hold-off counts and
// the job has no attempt left: the caller fails the attempt.
func (a *applier) holdOffCapped(j *store.Job, prev store.Status, r *Report, msg string) (bool, string) {
	fx := a.f.idx.flow
	st, runAt := store.StatusSnoozed, after(a.now, r.SnoozeFor)
	if r.RateLimitedFor != 0 {
		d := min(r.RateLimitedFor, fx.maxPauseOf(j.Queue))
		st, runAt = store.StatusRateLimited, a.now
		switch {
		case j.ConcurrencyKey != "":
			a.pause(j.Queue, j.ConcurrencyKey, after(a.now, d), msg)
		case fx.pausesQueue(j.Queue):
			a.pause(j.Queue, "", after(a.now, d), msg)
		default:
			runAt = after(a.now, d) // the job alone waits
		}
	}
	counts := heldOffInARow(j.History) >= MaxHoldOffs
	if counts {
		msg = fmt.Sprintf("%s (held off over %d times in a row: counted as an attempt)", msg, MaxHoldOffs)
		if j.Attempts >= j.MaxAttempts {
			return false, msg
		}
	}
	a.endAttempt(j, st, msg, false)
	j.LastError = msg
	j.Status = store.StatusPending
	if !counts {
		j.Attempts--
	}
	j.RunAt = runAt
	a.put(j, prev)
	return true, msg
}
