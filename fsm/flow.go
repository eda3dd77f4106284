package fsm

import (
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
	groups   map[gkey]*itemTree[readyItem]
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
		groups:   make(map[gkey]*itemTree[readyItem]),
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
