package fsm

import (
	"cmp"
	"slices"
	"strings"
)

// LiftPauses ends rate-limit pauses of a queue before their time
// (ProtocolPauses): with All, the queue's own and every key's; else the
// queue's own (Key "") or one key's. Lifting a pause that is not there
// changes nothing. It does not touch an admin's pause_queue.
type LiftPauses struct {
	Queue string `json:"q"`
	Key   string `json:"key,omitempty"`
	All   bool   `json:"all,omitempty"`
}

// liftPauses ends the pauses l names; Result.Deleted counts those that
// were in force.
func (a *applier) liftPauses(l *LiftPauses) Result {
	if l.All && l.Key != "" {
		return Result{Err: &ValidationError{Field: "key", Reason: "lifting all of a queue's pauses names no key"}}
	}
	x := a.f.idx
	fx := x.flow
	var keys []string
	if _, ok := fx.qPause[l.Queue]; ok && (l.All || l.Key == "") {
		keys = append(keys, "")
	}
	if l.All {
		var ks []string
		for k := range fx.keyPause {
			if k.queue == l.Queue {
				ks = append(ks, k.key)
			}
		}
		slices.Sort(ks)
		keys = append(keys, ks...)
	} else if _, ok := fx.keyPause[qkey{l.Queue, l.Key}]; ok && l.Key != "" {
		keys = append(keys, l.Key)
	}
	n := 0
	for _, key := range keys {
		if a.liftPause(l.Queue, key) {
			n++
		}
	}
	if len(keys) > 0 {
		a.readyChanged = true
	}
	return Result{Deleted: n}
}

// liftPause ends the pause of queue's key (key "": of the queue itself) at
// the entry's time and deletes its record; the pause's wait in fx.waits is
// then stale, and reopen skips it. It reports whether the pause was in
// force.
func (a *applier) liftPause(queue, key string) bool {
	x := a.f.idx
	fx := x.flow
	a.must(a.tx.DeletePause(queue, key != "", key))
	if key == "" {
		inForce := fx.qPause[queue].Until > a.now
		x.openQueueAt(queue, a.now, func() { delete(fx.qPause, queue) })
		return inForce
	}
	k := qkey{queue, key}
	inForce := fx.keyPause[k].Until > a.now
	x.setKeyAt(k, a.now, func() { delete(fx.keyPause, k) })
	return inForce
}

// QueuePause is a pause in force, with its queue.
type QueuePause struct {
	Queue string
	KeyPause
}

// Pauses lists the pauses in force at now by queue then key (a queue's own
// first): at most limit of those after the pause (afterQueue, afterKey)
// when after is set (a page's last, to page on), and how many are in force
// in all.
func (f *FSM) Pauses(now int64, after *QueuePause, limit int) ([]QueuePause, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fx := f.idx.flow
	var all []QueuePause
	for q, p := range fx.qPause {
		if p.Until > now {
			all = append(all, QueuePause{Queue: q, KeyPause: KeyPause{Until: p.Until, Reason: p.Reason}})
		}
	}
	for k, p := range fx.keyPause {
		if p.Until > now {
			all = append(all, QueuePause{Queue: k.queue, KeyPause: KeyPause{Key: k.key, Until: p.Until, Reason: p.Reason}})
		}
	}
	slices.SortFunc(all, func(a, b QueuePause) int {
		return cmp.Or(strings.Compare(a.Queue, b.Queue), strings.Compare(a.Key, b.Key))
	})
	from := 0
	if after != nil {
		from, _ = slices.BinarySearchFunc(all, after, func(p QueuePause, a *QueuePause) int {
			return cmp.Or(strings.Compare(p.Queue, a.Queue), strings.Compare(p.Key, a.Key), -1)
		})
	}
	page := all[from:]
	return page[:min(len(page), max(limit, 0))], len(all)
}
