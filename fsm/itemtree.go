package fsm

import "github.com/google/btree"

// itemTree is an ordered set of the index's items (pending jobs' in the
// ready trees, the keys' groups and the delayed tree; leases), read in its
// order by Min, Ascend and AscendGreaterOrEqual. It keeps the items in a
// btree in the reverse of that order, for memory: jobs come in mostly in
// order (a new job sorts after the jobs of its priority before it: a later
// run time, a higher seq; a new lease after the leases of the same TTL
// before it), and a btree.BTreeG filled at its high end splits each full
// node into a half left behind in the node's array of twice its size,
// never filled again, while one filled at its low end leaves behind halves
// in arrays cut to their size. A 1,000,000-job fill took 102 bytes of heap
// a pending job in order, and 52 reversed (BenchmarkPendingMemory; the
// item is 48 bytes). Reversing changes no order the index reads.
type itemTree[T any] struct {
	t *btree.BTreeG[T]
}

// itemDegree is the degree of the items' btrees: nodes of up to 63 items.
const itemDegree = 32

// newItemTree is an empty tree of items that the btree keeps ordered by
// after, and reads in reverse: after(a, b) reports whether a comes after b
// in the order the tree is read in (readyAfter, delayedAfter, leaseAfter).
func newItemTree[T any](after func(a, b T) bool) *itemTree[T] {
	return &itemTree[T]{t: btree.NewG(itemDegree, after)}
}

// readyAfter, delayedAfter and leaseAfter are readyLess, delayedLess and
// leaseLess with their arguments swapped, written out (TestItemTree checks
// each against its less): as a closure over less, or a call of less with
// the items swapped, each comparison took twice as long and a claim's pick
// 20-30 % longer than before the trees were reversed (BenchmarkPick).
func readyAfter(a, b readyItem) bool {
	if a.prio != b.prio {
		return a.prio < b.prio
	}
	if a.runAt != b.runAt {
		return a.runAt > b.runAt
	}
	return a.seq > b.seq
}

func delayedAfter(a, b readyItem) bool {
	if a.runAt != b.runAt {
		return a.runAt > b.runAt
	}
	return a.seq > b.seq
}

func leaseAfter(a, b leaseItem) bool {
	if a.deadline != b.deadline {
		return a.deadline > b.deadline
	}
	return a.id > b.id
}

// ReplaceOrInsert adds it, returning the item equal to it that it
// replaced, if any.
func (t *itemTree[T]) ReplaceOrInsert(it T) (T, bool) { return t.t.ReplaceOrInsert(it) }

// Delete removes the item equal to it and returns it, if there is one.
func (t *itemTree[T]) Delete(it T) (T, bool) { return t.t.Delete(it) }

// Min is the first item in the tree's order.
func (t *itemTree[T]) Min() (T, bool) { return t.t.Max() }

// DeleteMin removes the first item in the tree's order and returns it.
func (t *itemTree[T]) DeleteMin() (T, bool) { return t.t.DeleteMax() }

// Ascend calls fn on each item in order until fn returns false.
func (t *itemTree[T]) Ascend(fn func(T) bool) { t.t.Descend(fn) }

// AscendGreaterOrEqual calls fn in order on each item from pivot on
// (pivot included if in the tree) until fn returns false.
func (t *itemTree[T]) AscendGreaterOrEqual(pivot T, fn func(T) bool) {
	t.t.DescendLessOrEqual(pivot, fn)
}

// Len is the number of items in the tree.
func (t *itemTree[T]) Len() int { return t.t.Len() }
