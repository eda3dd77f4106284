package fsm

import (
	"slices"
	"sort"

	"github.com/google/btree"
)

// addReady puts a due pending job in its ready tree, or in its key's group
// (and the ready tree if it is the group's new head and the key is open).
func (x *index) addReady(it readyItem) {
	fx := x.flow
	kd, key := x.kindOf(it), x.keyOf(it)
	it.heldBase = fx.heldFor(kd.queue, key, min(it.runAt, fx.now))
	if key == "" {
		if old, ok := x.readyTree(kd).ReplaceOrInsert(it); ok {
			x.drop(old)
		} else {
			fx.ready[kd.queue]++
		}
		return
	}
	k, gk := qkey{kd.queue, key}, gkey{kd, key}
	g := fx.groups[gk]
	if g == nil {
		g = newItemTree(readyAfter)
		fx.groups[gk] = g
		if fx.types[k] == nil {
			fx.types[k] = make(map[string]bool)
		}
		fx.types[k][kd.typ] = true
	}
	head, had := g.Min()
	if old, ok := g.ReplaceOrInsert(it); ok {
		x.drop(old)
	} else {
		fx.ready[kd.queue]++
		fx.keyReady[k]++
	}
	if !fx.keyOpen(k) {
		return
	}
	if had && readyLess(it, head) {
		x.readyTree(kd).Delete(head)
	}
	if !had || !readyLess(head, it) { // its new head, or the head it replaced
		x.putHead(it)
	}
}

// putHead puts a group's head in its ready tree and its key in its kind's
// byKey tree.
func (x *index) putHead(it readyItem) {
	kd := x.kindOf(it)
	x.readyTree(kd).ReplaceOrInsert(it)
	t := x.flow.byKey[kd]
	if t == nil {
		t = btree.NewOrderedG[string](16)
		x.flow.byKey[kd] = t
	}
	t.ReplaceOrInsert(x.keyOf(it))
}

// dropHead takes a group's head out of its ready tree and byKey tree.
func (x *index) dropHead(it readyItem) {
	kd := x.kindOf(it)
	if t := x.ready[kd]; t != nil {
		t.Delete(it)
	}
	if t := x.flow.byKey[kd]; t != nil {
		t.Delete(x.keyOf(it))
		if t.Len() == 0 {
			delete(x.flow.byKey, kd)
		}
	}
}

// removeReady takes a due pending job out of its ready tree or group.
func (x *index) removeReady(it readyItem) {
	fx := x.flow
	kd, key := x.kindOf(it), x.keyOf(it)
	if key == "" {
		if t := x.ready[kd]; t != nil {
			if old, ok := t.Delete(it); ok {
				fx.ready[kd.queue]--
				x.drop(old)
			}
		}
		return
	}
	k, gk := qkey{kd.queue, key}, gkey{kd, key}
	g := fx.groups[gk]
	if g == nil {
		return
	}
	head, _ := g.Min()
	old, ok := g.Delete(it)
	if !ok {
		return
	}
	fx.ready[kd.queue]--
	fx.keyReady[k]--
	if fx.keyReady[k] == 0 {
		delete(fx.keyReady, k)
		if fx.keyOpen(k) {
			delete(fx.kHeld, k)
		}
	}
	if fx.keyOpen(k) && head.seq == it.seq {
		if next, ok := g.Min(); ok {
			x.ready[kd].Delete(it)
			x.putHead(next)
		} else {
			x.dropHead(it)
		}
	}
	if g.Len() == 0 {
		delete(fx.groups, gk)
		delete(fx.types[k], kd.typ)
		if len(fx.types[k]) == 0 {
			delete(fx.types, k)
		}
	}
	// Last: old's references keep kd and key interned until here.
	x.drop(old)
}

// setKey changes a key's state by fn, moving its heads in or out of the
// ready trees when it opens or closes.
func (x *index) setKey(k qkey, fn func()) {
	x.setKeyAt(k, x.flow.now, fn)
}

// openQueueAt makes fn's change to what holds queue q back, one that took
// effect at end (a bucket that refilled, a pause that ran out): a hold of
// the queue ends at end, and the queue may take claims again.
func (x *index) openQueueAt(q string, end int64, fn func()) {
	fx := x.flow
	was := fx.queueHeld(q)
	if was {
		x.holdEnds()
	}
	fn()
	fx.queueMoved(q, was, end)
	fx.reopened[qkey{q, ""}] = true
}

// setKeyAt is setKey for a change that took effect at end (a bucket that
// refilled then): a hold of the key ends at end.
func (x *index) setKeyAt(k qkey, end int64, fn func()) {
	fx := x.flow
	if !fx.keyOpen(k) {
		x.holdEnds()
	}
	was := fx.keyOpen(k)
	fn()
	now := fx.keyOpen(k)
	if was == now {
		return
	}
	fx.keyHeld(k, !now, end)
	for _, typ := range sortedKeys(fx.types[k]) {
		kd := kind{k.queue, typ}
		head, ok := fx.groups[gkey{kd, k.key}].Min()
		if !ok {
			continue
		}
		if now {
			x.putHead(head)
		} else {
			x.dropHead(head)
		}
	}
	if now {
		fx.reopened[k] = true
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// run counts an attempt of a job of queue and key starting (+1) or ending
// (-1), closing or reopening its key at its concurrency.
func (x *index) run(queue, key string, d int) {
	fx := x.flow
	was := fx.queueHeld(queue)
	if was && d < 0 {
		x.holdEnds()
	}
	fx.running[queue] += d
	if fx.running[queue] == 0 {
		delete(fx.running, queue)
	}
	fx.queueMoved(queue, was, fx.now)
	if was && d < 0 {
		fx.reopened[qkey{queue, ""}] = true
	}
	if key == "" {
		return
	}
	k := qkey{queue, key}
	x.setKey(k, func() {
		fx.keyRun[k] += d
		if fx.keyRun[k] == 0 {
			delete(fx.keyRun, k)
		}
		fx.keyFull[k] = x.keyAtLimit(k)
		if !fx.keyFull[k] {
			delete(fx.keyFull, k)
		}
	})
}

func (x *index) keyAtLimit(k qkey) bool {
	l := x.flow.limits[k.queue]
	return l != nil && l.KeyConcurrency > 0 && x.flow.keyRun[k] >= l.KeyConcurrency
}

// closeUntil marks a bucket empty until until.
func (x *index) closeUntil(queue, key string, isKey bool, until int64) {
	fx := x.flow
	if !isKey {
		was := fx.queueHeld(queue)
		fx.qUntil[queue] = until
		fx.queueMoved(queue, was, fx.now)
	} else {
		k := qkey{queue, key}
		x.setKey(k, func() { fx.keyUntil[k] = until })
	}
	fx.waits.ReplaceOrInsert(waitItem{until: until, queue: queue, key: key, isKey: isKey})
}

// reopen reopens the buckets that have a token again at now, and ends the
// pauses that run out by now, which it returns (their records are the
// caller's to delete).
func (x *index) reopen(now int64) []waitItem {
	fx := x.flow
	var ended []waitItem
	for {
		w, ok := fx.waits.Min()
		if !ok || w.until > now {
			return ended
		}
		fx.waits.DeleteMin()
		if w.pause && !x.pauseIs(w) {
			continue // replaced by a later pause
		}
		x.clearUntil(w)
		if w.pause {
			ended = append(ended, w)
		}
	}
}

// clearUntil ends a bucket's wait, if w is still its wait.
func (x *index) clearUntil(w waitItem) {
	fx := x.flow
	end := min(w.until, fx.now) // the bucket had a token again, or the pause ran out, then
	if w.pause {
		x.endPause(w, end)
		return
	}
	if !w.isKey {
		if fx.qUntil[w.queue] == w.until {
			x.openQueueAt(w.queue, end, func() { delete(fx.qUntil, w.queue) })
		}
		return
	}
	k := qkey{w.queue, w.key}
	if fx.keyUntil[k] == w.until {
		x.setKeyAt(k, end, func() { delete(fx.keyUntil, k) })
	}
}

// nextReopen is the earliest time an empty bucket refills, 0 if none.
func (fx *flowIndex) nextReopen() int64 {
	if w, ok := fx.waits.Min(); ok {
		return w.until
	}
	return 0
}

// dueReopen reports whether a bucket of one of the queues refills by now.
func (fx *flowIndex) dueReopen(kinds [][]kind, now int64) bool {
	found := false
	fx.waits.Ascend(func(w waitItem) bool {
		if w.until > now {
			return false
		}
		found = slices.ContainsFunc(kinds, func(ks []kind) bool { return len(ks) > 0 && ks[0].queue == w.queue })
		return !found
	})
	return found
}
