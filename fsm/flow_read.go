package fsm

import (
	"fmt"
	"time"

	"github.com/workron/workron/store"
)

// QueueFlow is a queue's limits and what runs and waits against them.
type QueueFlow struct {
	Limits  store.QueueLimits
	Running int // attempts running in the queue
	// Held counts the due jobs each kind of limit holds back: a queue's
	// "concurrency", "rate" and "paused" (a pause a rate-limited attempt
	// asked for, pause.go), its keys' "key_concurrency", "key_rate" and
	// "key_paused"; a job counts once, under the first of these, in this
	// order, that holds it.
	Held map[string]int
	// RateLimitedUntil is when the queue's bucket has a token again, 0 if
	// it has one.
	RateLimitedUntil int64
	// Keys is how many keys are at their concurrency, and how many out of
	// tokens.
	KeysFull, KeysRateLimited int
	// Paused lists the pauses rate-limited attempts asked for that are in
	// force: the queue's own (Key "") first, then its keys' by key.
	Paused []KeyPause
}

// QueueLimits returns a queue's flow: its limits (zero when none) and
// what they hold back.
func (f *FSM) QueueLimits(queue string) QueueFlow {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.idx.queueFlow(queue, f.lastNow)
}

func (x *index) queueFlow(q string, now int64) QueueFlow {
	fx := x.flow
	out := QueueFlow{Running: fx.running[q], Held: make(map[string]int), Paused: x.pausesOf(q, now)}
	if l := fx.limits[q]; l != nil {
		out.Limits = *l
	}
	if u := fx.qUntil[q]; u > now {
		out.RateLimitedUntil = u
	}
	// A job counts once, under the first limit that holds it (HeldBy's
	// order): a queue's limit or pause holds all its due jobs.
	queueHeld := true
	switch {
	case out.Limits.Concurrency > 0 && out.Running >= out.Limits.Concurrency:
		out.Held["concurrency"] = fx.ready[q]
	case out.RateLimitedUntil != 0:
		out.Held["rate"] = fx.ready[q]
	case fx.qPause[q].Until > now:
		out.Held["paused"] = fx.ready[q]
	default:
		queueHeld = false
	}
	for k := range fx.keyFull {
		if k.queue == q {
			out.KeysFull++
			if !queueHeld {
				out.Held["key_concurrency"] += fx.keyReady[k]
			}
		}
	}
	for k, u := range fx.keyUntil {
		if k.queue == q && u > now {
			out.KeysRateLimited++
			if !queueHeld && !fx.keyFull[k] {
				out.Held["key_rate"] += fx.keyReady[k]
			}
		}
	}
	for k, p := range fx.keyPause {
		if k.queue == q && p.Until > now && !queueHeld && !fx.keyFull[k] && fx.keyUntil[k] <= now {
			out.Held["key_paused"] += fx.keyReady[k]
		}
	}
	return out
}

// LimitedQueues lists the queues that have limits, by name.
func (f *FSM) LimitedQueues() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return sortedKeys(f.idx.flow.limits)
}

// HeldBy says which limit holds a pending job back at now, "" if none: its
// queue's concurrency, rate or pause, else its key's, in QueueFlow.Held's
// order.
func (f *FSM) HeldBy(j *store.Job, now int64) string {
	if j.Status != store.StatusPending || j.RunAt > now {
		return ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fx := f.idx.flow
	q := j.Queue
	k := qkey{q, j.ConcurrencyKey}
	l := fx.limits[q]
	if l == nil {
		l = &store.QueueLimits{}
	}
	switch {
	case l.Concurrency > 0 && fx.running[q] >= l.Concurrency:
		return fmt.Sprintf("queue %s at its limit %d/%d", q, fx.running[q], l.Concurrency)
	case fx.qUntil[q] > now:
		return fmt.Sprintf("queue %s rate-limited until %s", q, rfc3339(fx.qUntil[q]))
	case fx.qPause[q].Until > now:
		return pauseWaiting("queue "+q, fx.qPause[q], now)
	case k.key == "":
		return ""
	case fx.keyFull[k]:
		return fmt.Sprintf("key %s at its limit %d/%d", k.key, fx.keyRun[k], l.KeyConcurrency)
	case fx.keyUntil[k] > now:
		return fmt.Sprintf("key %s rate-limited until %s", k.key, rfc3339(fx.keyUntil[k]))
	}
	return pauseWaiting("key "+k.key, fx.keyPause[k], now)
}

func rfc3339(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }
