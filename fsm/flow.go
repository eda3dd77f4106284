package fsm

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/google/btree"

	"github.com/workron/workron/store"
)

// Flow control (issue #17): a queue's limits on running attempts, in all
// and per concurrency key, and its token-bucket rate limits, in all and per
// key. Every decision is a claim's, at the entry's time, from replicated
// state: the limits and buckets are in the store (and so in snapshots), the
// running counts are derived from the leases.
//
// The picker never scans the jobs a limit holds back. A queue at a limit is
// passed over whole, like a paused one. The pending jobs of one key and
// type form a group (a b-tree of their own), and only the group's best job
// (its head) sits in the ready tree of its kind, and only while the key is
// open: a key at its limit has its heads taken out, and put back when it
// reopens, so a claim costs O(log n) whatever the number of keys held back.
//
// Gang tasks carry no key; they count against their queue's concurrency
// while they run but are never held back (the leader places a gang whole),
// so a gang can take a queue past its limit.

// Bounds of a rate limit, so that a bucket's level (tokens × Per, see
// store.TokenBucket) fits in an int64.
const (
	MaxRateCount = 1_000_000
	MaxRatePer   = int64(3600e9) // an hour
	MaxBurst     = 1_000_000
)

// SetQueueLimits sets (replaces) a queue's limits; all zero removes them.
// A queue needs no jobs to have limits. Changing a rate or its burst
// restarts that rate's buckets full.
type SetQueueLimits struct {
	Name   string            `json:"name"`
	Limits store.QueueLimits `json:"limits"`
}

// qkey names a concurrency key of a queue.
type qkey struct{ queue, key string }

// gkey names a group: the pending jobs of one kind and key.
type gkey struct {
	kind
	key string
}

// waitItem is a bucket that is empty until until: a queue's (key "" and
// !isKey) or a key's; or, with pause set, a pause asked for by the work
// (pause.go).
type waitItem struct {
	until int64
	queue string
	key   string
	isKey bool
	pause bool
}

func waitLess(a, b waitItem) bool {
	if a.until != b.until {
		return a.until < b.until
	}
	if a.queue != b.queue {
		return a.queue < b.queue
	}
	if a.isKey != b.isKey {
		return b.isKey
	}
	if a.key != b.key {
		return a.key < b.key
	}
	return !a.pause && b.pause
}

// flowIndex is the in-memory side of flow control, rebuilt with the index.
type flowIndex struct {
	limits   map[string]*store.QueueLimits
	running  map[string]int // leased attempts by queue
	keyRun   map[qkey]int   // leased attempts by key
	groups   map[gkey]*btree.BTreeG[readyItem]
	types    map[qkey]map[string]bool // the types of a key's groups
	ready    map[string]int           // due pending jobs by queue
	keyReady map[qkey]int             // due pending jobs by key
	keyFull  map[qkey]bool            // at its key concurrency
	keyUntil map[qkey]int64           // its bucket is empty until then
	qUntil   map[string]int64         // the queue's bucket is empty until then
	qBucket  map[string]store.TokenBucket
	kBucket  map[qkey]store.TokenBucket
	waits    *btree.BTreeG[waitItem]
	qPause   map[string]store.Pause         // the queue is paused by its work (pause.go)
	keyPause map[qkey]store.Pause           // the key is paused by its work
	byKey    map[kind]*btree.BTreeG[string] // the open keys with a head, by kind (fair.go)
	rot      map[string]store.Rotation      // each queue's place in its rotation
	// now is the time of the entry being applied (of the rebuild, while
	// rebuilding); the held clocks read it.
	now int64
	// qHeld and kHeld measure how long queues and keys held their due
	// jobs back, at a limit or paused (see heldClock); a key's only while
	// it has due jobs.
	qHeld map[string]heldClock
	kHeld map[qkey]heldClock
	// reopened are the queues (key "") and keys that reopened during the
	// entry; settle says whether any is still open at its end (a renewal
	// frees and takes a key's slot at once, and must wake nobody).
	reopened map[qkey]bool
}

func newFlowIndex() *flowIndex {
	return &flowIndex{
		limits:   make(map[string]*store.QueueLimits),
		running:  make(map[string]int),
		keyRun:   make(map[qkey]int),
		groups:   make(map[gkey]*btree.BTreeG[readyItem]),
		types:    make(map[qkey]map[string]bool),
		ready:    make(map[string]int),
		keyReady: make(map[qkey]int),
		keyFull:  make(map[qkey]bool),
		keyUntil: make(map[qkey]int64),
		qUntil:   make(map[string]int64),
		qBucket:  make(map[string]store.TokenBucket),
		kBucket:  make(map[qkey]store.TokenBucket),
		waits:    btree.NewG(16, waitLess),
		qPause:   make(map[string]store.Pause),
		keyPause: make(map[qkey]store.Pause),
		byKey:    make(map[kind]*btree.BTreeG[string]),
		rot:      make(map[string]store.Rotation),
		qHeld:    make(map[string]heldClock),
		kHeld:    make(map[qkey]heldClock),
		reopened: make(map[qkey]bool),
	}
}

// settle reports whether a queue or key that reopened during the entry is
// open at its end, so that long-polls may claim, and forgets them.
func (fx *flowIndex) settle() bool {
	open := false
	for k := range fx.reopened {
		if k.key == "" {
			open = open || !fx.queueHeld(k.queue)
		} else {
			open = open || fx.keyOpen(k)
		}
	}
	clear(fx.reopened)
	return open
}

// keyOpen reports whether a key's jobs may be claimed.
func (fx *flowIndex) keyOpen(k qkey) bool {
	return !fx.keyFull[k] && fx.keyUntil[k] == 0 && fx.keyPause[k].Until == 0
}

// queueHeld reports whether a queue is at its concurrency or out of tokens.
func (fx *flowIndex) queueHeld(q string) bool {
	if fx.qUntil[q] != 0 || fx.qPause[q].Until != 0 {
		return true
	}
	l := fx.limits[q]
	return l != nil && l.Concurrency > 0 && fx.running[q] >= l.Concurrency
}

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
		g = btree.NewG(32, readyLess)
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

// refill is b at now: Count units a nanosecond, up to burst tokens. An
// absent bucket (At 0) is full.
func refill(b store.TokenBucket, r store.Rate, burst int, now int64) store.TokenBucket {
	capacity := int64(burst) * r.Per
	switch {
	case b.At == 0:
		return store.TokenBucket{Level: capacity, At: now}
	case now > b.At:
		room := capacity - b.Level
		if e := now - b.At; room <= 0 || e > room/r.Count {
			b.Level = capacity
		} else {
			b.Level += e * r.Count
		}
		b.At = now
	}
	b.Level = min(b.Level, capacity)
	return b
}

// refillAt is when b, short of a token, has one again.
func refillAt(b store.TokenBucket, r store.Rate) int64 {
	short := r.Per - b.Level
	return after(b.At, (short+r.Count-1)/r.Count)
}

// burstOf is a rate's burst: as set, else its Count (one period's worth).
func burstOf(r store.Rate, burst int) int {
	if burst > 0 {
		return burst
	}
	return int(r.Count)
}

// takeTokens takes a token from the buckets of the job's queue and key,
// if both have one at now; else it closes the empty one and takes none.
func (a *applier) takeTokens(it readyItem) bool {
	fx := a.f.idx.flow
	q := a.f.idx.queueOf(it)
	l := fx.limits[q]
	if l == nil || (l.Rate.IsZero() && (l.KeyRate.IsZero() || it.key == 0)) {
		return true
	}
	key := a.f.idx.keyOf(it)
	var qb, kb store.TokenBucket
	useQ, useK := !l.Rate.IsZero(), !l.KeyRate.IsZero() && key != ""
	k := qkey{q, key}
	if useQ {
		qb = refill(fx.qBucket[q], l.Rate, burstOf(l.Rate, l.Burst), a.now)
		if qb.Level < l.Rate.Per {
			a.f.idx.closeUntil(q, "", false, refillAt(qb, l.Rate))
			return false
		}
	}
	if useK {
		kb = refill(fx.kBucket[k], l.KeyRate, burstOf(l.KeyRate, l.KeyBurst), a.now)
		if kb.Level < l.KeyRate.Per {
			a.f.idx.closeUntil(q, key, true, refillAt(kb, l.KeyRate))
			return false
		}
	}
	if useQ {
		qb.Level -= l.Rate.Per
		fx.qBucket[q] = qb
		a.must(a.tx.PutTokenBucket(q, false, "", qb))
		if qb.Level < l.Rate.Per {
			a.f.idx.closeUntil(q, "", false, refillAt(qb, l.Rate))
		}
	}
	if useK {
		kb.Level -= l.KeyRate.Per
		fx.kBucket[k] = kb
		a.must(a.tx.PutTokenBucket(q, true, key, kb))
		if kb.Level < l.KeyRate.Per {
			a.f.idx.closeUntil(q, key, true, refillAt(kb, l.KeyRate))
		}
	}
	return true
}

// checkLimits checks a queue's limits as the FSM needs them (the API says
// more, and first).
func checkLimits(l *store.QueueLimits) error {
	switch {
	case l.Concurrency < 0:
		return &ValidationError{Field: "concurrency", Reason: "must not be negative"}
	case l.KeyConcurrency < 0:
		return &ValidationError{Field: "key_concurrency", Reason: "must not be negative"}
	}
	if err := checkRate("rate", "burst", l.Rate, l.Burst); err != nil {
		return err
	}
	if err := checkWeights(l.KeyWeights); err != nil {
		return err
	}
	if err := checkPauseSettings(l); err != nil {
		return err
	}
	return checkRate("key_rate", "key_burst", l.KeyRate, l.KeyBurst)
}

// Bounds of a queue's KeyWeights.
const (
	MaxKeyWeights = 1000
	MaxKeyWeight  = 1000
)

func checkWeights(ws map[string]int) error {
	if len(ws) > MaxKeyWeights {
		return &ValidationError{Field: "key_weights", Reason: fmt.Sprintf("more than %d keys", MaxKeyWeights)}
	}
	for _, k := range sortedKeys(ws) {
		if err := keyLen("key_weights", k, false); err != nil {
			return err
		}
		if w := ws[k]; w < 1 || w > MaxKeyWeight {
			return &ValidationError{Field: "key_weights." + k, Reason: fmt.Sprintf("must be from 1 to %d", MaxKeyWeight)}
		}
	}
	return nil
}

func checkRate(field, burstField string, r store.Rate, burst int) error {
	switch {
	case burst < 0 || burst > MaxBurst:
		return &ValidationError{Field: burstField, Reason: fmt.Sprintf("must be from 0 to %d", MaxBurst)}
	case r.IsZero() && r.Per != 0:
		return &ValidationError{Field: field, Reason: "a period without a count"}
	case r.IsZero():
		return nil
	case r.Count < 0 || r.Count > MaxRateCount:
		return &ValidationError{Field: field, Reason: fmt.Sprintf("count must be from 1 to %d", MaxRateCount)}
	case r.Per <= 0 || r.Per > MaxRatePer:
		return &ValidationError{Field: field, Reason: "period must be from 1ns to 1h"}
	}
	return nil
}

// setQueueLimits replaces a queue's limits, and re-decides which of its
// keys are open under them.
func (a *applier) setQueueLimits(s *SetQueueLimits) Result {
	if s.Name == "" {
		return Result{Err: &ValidationError{Field: "name", Reason: "must not be empty"}}
	}
	if err := checkLimits(&s.Limits); err != nil {
		return Result{Err: err}
	}
	x, q := a.f.idx, s.Name
	fx := x.flow
	old := fx.limits[q]
	if old == nil {
		old = &store.QueueLimits{}
	}
	l := s.Limits
	a.must(a.tx.PutQueueLimits(q, &l, a.index))
	was := fx.queueHeld(q)
	if was {
		x.holdEnds()
	}
	if l.IsZero() {
		delete(fx.limits, q)
	} else {
		fx.limits[q] = &l
	}
	fx.queueMoved(q, was, fx.now)
	if old.Rate != l.Rate || old.Burst != l.Burst {
		a.must(a.tx.DeleteTokenBuckets(q, false))
		delete(fx.qBucket, q)
		if u, ok := fx.qUntil[q]; ok {
			x.clearUntil(waitItem{until: u, queue: q})
		}
	}
	keys := x.queueKeys(q)
	if old.KeyRate != l.KeyRate || old.KeyBurst != l.KeyBurst {
		a.must(a.tx.DeleteTokenBuckets(q, true))
		for _, k := range keys {
			delete(fx.kBucket, k)
			if u, ok := fx.keyUntil[k]; ok {
				x.clearUntil(waitItem{until: u, queue: q, key: k.key, isKey: true})
			}
		}
	}
	for _, k := range keys {
		x.setKey(k, func() {
			if x.keyAtLimit(k) {
				fx.keyFull[k] = true
			} else {
				delete(fx.keyFull, k)
			}
		})
	}
	a.readyChanged = true
	return Result{}
}

// queueKeys lists the keys of a queue that have running attempts, pending
// jobs or a bucket, in order.
func (x *index) queueKeys(q string) []qkey {
	fx := x.flow
	seen := make(map[string]bool)
	add := func(k qkey) {
		if k.queue == q {
			seen[k.key] = true
		}
	}
	for k := range fx.keyRun {
		add(k)
	}
	for k := range fx.types {
		add(k)
	}
	for k := range fx.kBucket {
		add(k)
	}
	for k := range fx.keyUntil {
		add(k)
	}
	out := make([]qkey, 0, len(seen))
	for _, key := range sortedKeys(seen) {
		out = append(out, qkey{q, key})
	}
	return out
}

// rebuildFlow loads the limits and buckets; the jobs' scan that follows
// counts the running attempts and groups the pending jobs.
func (x *index) rebuildFlow(tx *store.Tx, now int64) error {
	fx := x.flow
	fx.now = now
	err := tx.ForEachQueueLimits(func(q string, l *store.QueueLimits) error {
		fx.limits[q] = l
		return nil
	})
	if err != nil {
		return err
	}
	err = tx.ForEachFlowState(func(q string, r store.Rotation) error {
		fx.rot[q] = r
		return nil
	}, func(q string, isKey bool, key string, p store.Pause) error {
		// Kept even when it has run out: the next claim deletes its
		// record, as on a node that applied the log all along.
		x.setPause(q, key, p)
		return nil
	})
	if err != nil {
		return err
	}
	return tx.ForEachTokenBucket(func(q string, isKey bool, key string, b store.TokenBucket) error {
		l := fx.limits[q]
		if l == nil {
			return nil // limits removed; the bucket is unused
		}
		r := l.Rate
		if isKey {
			r = l.KeyRate
			fx.kBucket[qkey{q, key}] = b
		} else {
			fx.qBucket[q] = b
		}
		if r.IsZero() {
			return nil
		}
		if b.Level < r.Per {
			if until := refillAt(b, r); until > now {
				x.closeUntil(q, key, isKey, until)
			}
		}
		return nil
	})
}

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

// heldClock measures how long a queue, or a key, held its due jobs back
// (at a limit, out of tokens, or paused by a rate-limited attempt): held is the time it held them before since, and since is when its
// current hold began (0: it holds none back now). A key's clock counts only
// the time its queue did not hold the jobs too, so that a job's time held
// is its queue's clock plus its key's, each read when the job became due
// and when it was claimed: qAt is the queue's clock when the key's hold
// began.
//
// A delayed job is indexed as due by the first claim after its run time;
// it reads the clocks at its run time, and before a hold ends the due
// jobs are indexed (holdEnds), so that none misses a hold it was due in.
// A hold of a current segment read before its start counts as none.
//
// The clocks are in memory: a node counts from its last start or restore,
// and a job that was due then counts from then. Their readings only go to
// the leader's metrics (Result.Held), never into the store.
type heldClock struct {
	held, since, qAt int64
}

// queueClock is the time queue q has held its jobs back, as of t (at most
// fx.now).
func (fx *flowIndex) queueClock(q string, t int64) int64 {
	c := fx.qHeld[q]
	if c.since != 0 && t > c.since {
		return c.held + t - c.since
	}
	return c.held
}

// heldFor is the clock a job of queue q and key reads at t: the time its
// queue held jobs back, plus the time its key did while the queue did not.
func (fx *flowIndex) heldFor(q, key string, t int64) int64 {
	qc := fx.queueClock(q, t)
	if key == "" {
		return qc
	}
	c := fx.kHeld[qkey{q, key}]
	if c.since != 0 && t > c.since {
		return qc + c.held + max((t-c.since)-(qc-c.qAt), 0)
	}
	return qc + c.held
}

// holdEnds indexes the delayed jobs due by now before a queue's or a key's
// hold may end, so that they read its clock while it runs.
func (x *index) holdEnds() { x.promote(x.flow.now) }

// queueMoved starts or stops q's clock, at end, if the queue's hold
// changed from was.
func (fx *flowIndex) queueMoved(q string, was bool, end int64) {
	now := fx.queueHeld(q)
	if now == was {
		return
	}
	c := fx.qHeld[q]
	if now {
		c.since = fx.now
	} else {
		c.held, c.since = c.held+max(end-c.since, 0), 0
	}
	fx.qHeld[q] = c
}

// keyHeld starts (closed) or stops k's clock, at end. A key that opens
// with no due jobs forgets its clock: no job's reading refers to it.
func (fx *flowIndex) keyHeld(k qkey, closed bool, end int64) {
	c := fx.kHeld[k]
	switch {
	case closed:
		c.since, c.qAt = fx.now, fx.queueClock(k.queue, fx.now)
	case fx.keyReady[k] == 0:
		delete(fx.kHeld, k)
		return
	default:
		c.held = fx.heldFor(k.queue, k.key, end) - fx.queueClock(k.queue, end)
		c.since, c.qAt = 0, 0
	}
	fx.kHeld[k] = c
}

// heldTime is how long limits held a job back that is being claimed at
// fx.now: its clock now less its clock when it became due, at most its
// time since its run time.
func (x *index) heldTime(it readyItem) int64 {
	fx := x.flow
	d := fx.heldFor(x.queueOf(it), x.keyOf(it), fx.now) - it.heldBase
	return max(min(d, fx.now-it.runAt), 0)
}

// noteHeld records, before the claim takes it, how long limits or pauses
// held back a job of a queue with limits (or of one without, that has just
// lost them or whose pause held the job).
func (a *applier) noteHeld(it readyItem, id string) {
	d := a.f.idx.heldTime(it)
	if a.f.idx.flow.limits[a.f.idx.queueOf(it)] == nil && d == 0 {
		return
	}
	if a.held == nil {
		a.held = make(map[string]int64)
	}
	a.held[id] = d
}
