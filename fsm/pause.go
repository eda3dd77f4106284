package fsm

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/workron/workron/store"
)

// Backpressure from the work (issue #17): a failure report may say the
// attempt met a rate limit downstream (RateLimitedFor) or ask to run again
// later (SnoozeFor). Neither attempt counts against max_attempts; the job
// is pending again. A rate-limited attempt also pauses its job's
// concurrency key (with no key, its queue) until the entry's time plus
// RateLimitedFor: claims of every worker pass the key over until then,
// like a key out of tokens. Pauses are stored (store.Pause) and so kept by
// snapshots; one that has run out is deleted by the next claim. A report
// of ProtocolPauses (Report.Capped) is bounded further: pause_bounds.go.

// MaxPause bounds a report's RateLimitedFor and SnoozeFor.
const MaxPause = int64(24 * time.Hour)

// checkBackpressure checks a report's fields of ProtocolBackpressure.
func checkBackpressure(r *Report) error {
	switch {
	case r.RateLimitedFor == 0 && r.SnoozeFor == 0:
		return nil
	case r.RateLimitedFor != 0 && r.SnoozeFor != 0:
		return &ValidationError{Field: "snooze_for", Reason: "a report is rate-limited or snoozed, not both"}
	case r.Success:
		return &ValidationError{Field: "rate_limited_for", Reason: "only a failure is rate-limited or snoozed"}
	case r.RateLimitedFor < 0 || r.RateLimitedFor > MaxPause:
		return &ValidationError{Field: "rate_limited_for", Reason: "must be from 1ns to 24h"}
	case r.SnoozeFor < 0 || r.SnoozeFor > MaxPause:
		return &ValidationError{Field: "snooze_for", Reason: "must be from 1ns to 24h"}
	}
	return nil
}

// holdOff ends an unindexed job's attempt as r says (rate-limited or
// snoozed), without counting it, and reports whether it did: a cancelling
// job and a gang task are ended as failures instead, with the message
// returned. A capped report follows pause_bounds.go's rules.
func (a *applier) holdOff(j *store.Job, prev store.Status, r *Report, msg string) (bool, string) {
	if !r.backpressure() || prev == store.StatusCancelling || j.GangID != "" {
		return false, msg
	}
	if r.Capped {
		return a.holdOffCapped(j, prev, r, msg)
	}
	st, runAt := store.StatusSnoozed, after(a.now, r.SnoozeFor)
	if r.RateLimitedFor != 0 {
		st, runAt = store.StatusRateLimited, a.now
		a.pause(j.Queue, j.ConcurrencyKey, after(a.now, r.RateLimitedFor), msg)
	}
	a.endAttempt(j, st, msg, false)
	j.LastError = msg
	j.Status = store.StatusPending
	j.Attempts--
	j.RunAt = runAt
	a.put(j, prev)
	return true, msg
}

// pause holds the claims of a queue's key (or of the queue, key "") until
// until, or later if it already was.
func (a *applier) pause(queue, key string, until int64, reason string) {
	x := a.f.idx
	fx := x.flow
	isKey := key != ""
	k := qkey{queue, key}
	cur := fx.qPause[queue]
	if isKey {
		cur = fx.keyPause[k]
	}
	if cur.Until >= until {
		return
	}
	p := store.Pause{Until: until, Reason: tail(reason, maxPauseReason)}
	a.must(a.tx.PutPause(queue, isKey, key, p))
	x.setPause(queue, key, p)
}

// maxPauseReason bounds the reason a pause keeps.
const maxPauseReason = 256

// setPause records a pause in the index.
func (x *index) setPause(queue, key string, p store.Pause) {
	fx := x.flow
	if key == "" {
		was := fx.queueHeld(queue)
		fx.qPause[queue] = p
		fx.queueMoved(queue, was, fx.now)
	} else {
		k := qkey{queue, key}
		x.setKey(k, func() { fx.keyPause[k] = p })
	}
	fx.waits.ReplaceOrInsert(waitItem{until: p.Until, queue: queue, key: key, isKey: key != "", pause: true})
}

// pauseIs reports whether w is its queue's or key's current pause.
func (x *index) pauseIs(w waitItem) bool {
	if !w.isKey {
		return x.flow.qPause[w.queue].Until == w.until
	}
	return x.flow.keyPause[qkey{w.queue, w.key}].Until == w.until
}

// endPause ends a pause, if w is still its pause; end is when it ran out
// (the hold clocks stop then, flow.go's heldClock).
func (x *index) endPause(w waitItem, end int64) {
	fx := x.flow
	if !x.pauseIs(w) {
		return
	}
	if !w.isKey {
		x.openQueueAt(w.queue, end, func() { delete(fx.qPause, w.queue) })
		return
	}
	k := qkey{w.queue, w.key}
	x.setKeyAt(k, end, func() { delete(fx.keyPause, k) })
}

// deletePauses deletes the records of pauses that ended.
func (a *applier) deletePauses(ended []waitItem) {
	for _, w := range ended {
		a.must(a.tx.DeletePause(w.queue, w.isKey, w.key))
	}
}

// KeyPause is a pause a rate-limited attempt asked for.
type KeyPause struct {
	Key    string // "" for the queue itself
	Until  int64
	Reason string
}

// pausesOf lists a queue's pauses in force at now: the queue's own first,
// then its keys' by key.
func (x *index) pausesOf(q string, now int64) []KeyPause {
	fx := x.flow
	var out []KeyPause
	if p := fx.qPause[q]; p.Until > now {
		out = append(out, KeyPause{Until: p.Until, Reason: p.Reason})
	}
	var keys []KeyPause
	for k, p := range fx.keyPause {
		if k.queue == q && p.Until > now {
			keys = append(keys, KeyPause{Key: k.key, Until: p.Until, Reason: p.Reason})
		}
	}
	slices.SortFunc(keys, func(a, b KeyPause) int { return strings.Compare(a.Key, b.Key) })
	return append(out, keys...)
}

// RateLimitedQueues lists the queues with a pause in force at now (their
// own or a key's), by name.
func (f *FSM) RateLimitedQueues(now int64) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := make(map[string]bool)
	for q, p := range f.idx.flow.qPause {
		if p.Until > now {
			seen[q] = true
		}
	}
	for k, p := range f.idx.flow.keyPause {
		if p.Until > now {
			seen[k.queue] = true
		}
	}
	return sortedKeys(seen)
}

// pauseWaiting is what a job held by a pause waits on, "" if nothing.
func pauseWaiting(what string, p store.Pause, now int64) string {
	if p.Until <= now {
		return ""
	}
	s := fmt.Sprintf("%s rate-limited until %s", what, rfc3339(p.Until))
	if p.Reason != "" {
		s += " (" + p.Reason + ")"
	}
	return s
}
