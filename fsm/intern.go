package fsm

import (
	"strconv"

	"github.com/workron/workron/store"
)

// Intern tables give the pending jobs' index items (readyItem) small
// integer handles in place of their strings and pointers, so that the
// items hold no Go pointers and the garbage collector never scans the
// trees that hold them: its work no longer grows with the backlog.
//
// Handles are local to one node's index and depend on the order in which
// values came and went; nothing may order or compare by them except for
// equality, so that Apply's results are the same on every node.

// handle names an interned value; 0 is the zero value, never stored.
type handle uint32

// interns is a refcounted table of comparable values. Each item in the
// index that names a value holds one reference; the value's handle is
// freed with its last reference (a concurrency key per customer must not
// stay behind once its jobs are gone) and reused for the next new value.
type interns[T comparable] struct {
	ids  map[T]handle
	vals []T      // by handle; vals[0] is the zero value
	refs []uint32 // by handle
	free []handle
}

func newInterns[T comparable]() *interns[T] {
	return &interns[T]{ids: make(map[T]handle), vals: make([]T, 1), refs: make([]uint32, 1)}
}

// acquire returns v's handle, interning v if it is new, and takes a
// reference to it. The zero value is handle 0 and takes none.
func (t *interns[T]) acquire(v T) handle {
	var zero T
	if v == zero {
		return 0
	}
	if h, ok := t.ids[v]; ok {
		t.refs[h]++
		return h
	}
	var h handle
	if n := len(t.free); n > 0 {
		h, t.free = t.free[n-1], t.free[:n-1]
		t.vals[h], t.refs[h] = v, 1
	} else {
		h = handle(len(t.vals))
		t.vals, t.refs = append(t.vals, v), append(t.refs, 1)
	}
	t.ids[v] = h
	return h
}

// lookup returns v's handle without taking a reference; false if v is not
// interned (then no item names it).
func (t *interns[T]) lookup(v T) (handle, bool) {
	var zero T
	if v == zero {
		return 0, true
	}
	h, ok := t.ids[v]
	return h, ok
}

// release drops a reference to h, freeing h with its last one. It reports
// whether h was freed.
func (t *interns[T]) release(h handle) bool {
	if h == 0 {
		return false
	}
	if t.refs[h]--; t.refs[h] > 0 {
		return false
	}
	var zero T
	delete(t.ids, t.vals[h])
	t.vals[h] = zero // let the value's strings go
	t.free = append(t.free, h)
	return true
}

// get is the value of h.
func (t *interns[T]) get(h handle) T { return t.vals[h] }

// size is the number of values interned.
func (t *interns[T]) size() int { return len(t.ids) }

// needKey is a need as a comparable value: its tags in one string, each
// prefixed with its length so that no two lists share an encoding.
type needKey struct {
	res  store.Resources
	tags string
}

// needs interns what jobs ask of their workers, and keeps each one's need
// (what fit functions read) beside it.
type needs struct {
	keys *interns[needKey]
	vals []*need // by handle
}

func newNeeds() *needs { return &needs{keys: newInterns[needKey]()} }

// acquire returns the handle of a job's need, 0 if it asks for nothing.
func (n *needs) acquire(res store.Resources, tags []string) handle {
	if res.IsZero() && len(tags) == 0 {
		return 0
	}
	h := n.keys.acquire(needKeyOf(res, tags))
	for int(h) >= len(n.vals) {
		n.vals = append(n.vals, nil)
	}
	if n.vals[h] == nil {
		n.vals[h] = needOf(res, tags)
	}
	return h
}

func (n *needs) release(h handle) {
	if n.keys.release(h) {
		n.vals[h] = nil
	}
}

// get is the need of h, nil for 0.
func (n *needs) get(h handle) *need {
	if h == 0 {
		return nil
	}
	return n.vals[h]
}

func needKeyOf(res store.Resources, tags []string) needKey {
	var b []byte
	for _, t := range tags {
		b = strconv.AppendInt(b, int64(len(t)), 10)
		b = append(b, ':')
		b = append(b, t...)
	}
	return needKey{res: res, tags: string(b)}
}

// names keeps the ids of pending jobs that their submitters named (a
// generated id is derived from its seq, see jobID), by seq, with a
// reference per index item as interns does.
type names map[uint64]nameRef

type nameRef struct {
	id   string
	refs uint32
}

func (m names) acquire(seq uint64, id string) {
	r := m[seq]
	r.id = id
	r.refs++
	m[seq] = r
}

func (m names) release(seq uint64) {
	r := m[seq]
	if r.refs <= 1 {
		delete(m, seq)
		return
	}
	r.refs--
	m[seq] = r
}

// generatedID reports whether id is the id the FSM gives the job of seq,
// without building that id.
func generatedID(id string, seq uint64) bool {
	var b [maxJobID]byte
	return string(appendJobID(b[:0], seq)) == id
}
