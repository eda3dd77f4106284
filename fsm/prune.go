package fsm

import (
	"fmt"

	"github.com/workron/workron/store"
)

// Pruning idle key buckets (issue #17). A concurrency key's token bucket,
// once used, is a row in the store and an entry of kBucket. A bucket that
// is full at the entry's time decides every later claim as a missing one
// does (refill starts a missing bucket full, and time never runs backwards
// in the FSM), so deleting it changes no decision; the leader proposes
// prune_buckets every sweep so that the buckets of keys gone idle do not
// pile up.

// MaxPruneBuckets bounds PruneBuckets.Limit: the buckets one entry visits.
const MaxPruneBuckets = 10_000

// PruneBuckets deletes the key buckets that are full at the entry's time
// among the Limit stored buckets (queues' own count, but are kept) that
// follow After in key order, from the first when After is empty. The
// Result's Deleted says how many it deleted and its Next where the next
// one starts, nil when no bucket followed them. A Limit outside 1 to
// MaxPruneBuckets is a ValidationError.
type PruneBuckets struct {
	After []byte `json:"after,omitempty"`
	Limit int    `json:"limit"`
}

func (a *applier) pruneBuckets(p *PruneBuckets) Result {
	if p.Limit < 1 || p.Limit > MaxPruneBuckets {
		return Result{Err: &ValidationError{Field: "limit", Reason: fmt.Sprintf("must be from 1 to %d", MaxPruneBuckets)}}
	}
	fx := a.f.idx.flow
	n, next, err := a.tx.PruneTokenBuckets(p.After, p.Limit, func(q string, isKey bool, key string, b store.TokenBucket) bool {
		if !isKey || !fx.bucketIdle(q, b, a.now) {
			return false
		}
		delete(fx.kBucket, qkey{q, key})
		return true
	})
	a.must(err)
	return Result{Deleted: n, Next: next}
}

// bucketIdle reports whether a key bucket of queue q is as good as none at
// now: full, or unused (the queue has no key rate; setting one restarts
// its keys' buckets).
func (fx *flowIndex) bucketIdle(q string, b store.TokenBucket, now int64) bool {
	l := fx.limits[q]
	if l == nil || l.KeyRate.IsZero() {
		return true
	}
	burst := burstOf(l.KeyRate, l.KeyBurst)
	return refill(b, l.KeyRate, burst, now).Level >= int64(burst)*l.KeyRate.Per
}

// KeyBuckets is how many concurrency keys have a token bucket in memory
// (the leader prunes only when there are some).
func (f *FSM) KeyBuckets() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.idx.flow.kBucket)
}
