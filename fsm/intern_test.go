package fsm

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"testing"

	"github.com/workron/workron/store"
)

// pointerFree fails on any type whose values hold Go pointers: the garbage
// collector would scan them.
func pointerFree(t reflect.Type) error {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return nil
	case reflect.Array:
		return pointerFree(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if err := pointerFree(t.Field(i).Type); err != nil {
				return fmt.Errorf("%s.%s: %w", t.Name(), t.Field(i).Name, err)
			}
		}
		return nil
	}
	return fmt.Errorf("a %s holds pointers", t.Kind())
}

// TestReadyItemHoldsNoPointers keeps the pending jobs' items free of
// pointers, so that a backlog costs the garbage collector nothing to scan
// (intern.go): a string, slice, map, pointer or interface field fails it.
func TestReadyItemHoldsNoPointers(t *testing.T) {
	if err := pointerFree(reflect.TypeFor[readyItem]()); err != nil {
		t.Fatalf("readyItem: %v", err)
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[string](), reflect.TypeFor[*int](), reflect.TypeFor[[]int](),
		reflect.TypeFor[map[int]int](), reflect.TypeFor[any](), reflect.TypeFor[struct{ a [2]kind }]()} {
		if pointerFree(typ) == nil {
			t.Errorf("pointerFree(%s) = nil, want an error", typ)
		}
	}
}

func TestInterns(t *testing.T) {
	t.Run("ReleasesAValueWithItsLastReference", func(t *testing.T) {
		tb := newInterns[string]()
		a := tb.acquire("tenant-1")
		if b := tb.acquire("tenant-1"); b != a {
			t.Fatalf("a second acquire of a value = %d, want its handle %d", b, a)
		}
		if tb.release(a) {
			t.Fatal("release with a reference left freed the handle")
		}
		if got := tb.get(a); got != "tenant-1" {
			t.Fatalf("get = %q after one of two releases, want tenant-1", got)
		}
		if !tb.release(a) {
			t.Fatal("the last release did not free the handle")
		}
		if _, ok := tb.lookup("tenant-1"); ok || tb.size() != 0 {
			t.Fatalf("after the last release: lookup ok = %v, size %d; want gone", ok, tb.size())
		}
	})
	t.Run("ReusesFreedHandles", func(t *testing.T) {
		tb := newInterns[string]()
		for i := range 1000 { // a key per customer, one job each, coming and going
			h := tb.acquire(fmt.Sprint("customer-", i))
			if h != 1 {
				t.Fatalf("customer %d got handle %d, want the freed 1", i, h)
			}
			tb.release(h)
		}
		if len(tb.vals) != 2 || tb.size() != 0 {
			t.Fatalf("after 1000 keys came and went: %d slots, %d values; want 2 and 0", len(tb.vals), tb.size())
		}
	})
	t.Run("ZeroValueIsHandleZero", func(t *testing.T) {
		tb := newInterns[string]()
		if h := tb.acquire(""); h != 0 || tb.size() != 0 {
			t.Fatalf("acquire(\"\") = %d with size %d, want 0 and 0", h, tb.size())
		}
		if h, ok := tb.lookup(""); h != 0 || !ok {
			t.Fatalf("lookup(\"\") = %d %v, want 0 true", h, ok)
		}
		if tb.release(0) {
			t.Fatal("release(0) freed something")
		}
	})
	t.Run("NeedsTellTagListsApart", func(t *testing.T) {
		n := newNeeds()
		a, b := n.acquire(store.Resources{}, []string{"a,b"}), n.acquire(store.Resources{}, []string{"a", "b"})
		if a == b {
			t.Fatal("tags [a,b] and [a b] share a handle")
		}
		c := n.acquire(store.Resources{Slots: 1}, []string{"a", "b"})
		if c == b || n.get(c).res.Slots != 1 || !slices.Equal(n.get(b).tags, []string{"a", "b"}) {
			t.Fatalf("needs %+v and %+v", n.get(b), n.get(c))
		}
		if n.acquire(store.Resources{}, nil) != 0 || n.get(0) != nil {
			t.Fatal("asking for nothing is not handle 0 and need nil")
		}
		for _, h := range []handle{a, b, c} {
			n.release(h)
		}
		if n.keys.size() != 0 || n.vals[a] != nil || n.vals[c] != nil {
			t.Fatalf("%d needs left after every release", n.keys.size())
		}
	})
}

// items lists every pending job's item once: the delayed ones, the ready
// ones without a key and the groups' (a ready tree's key heads are copies).
func (x *index) items() []readyItem {
	var out []readyItem
	add := func(it readyItem) bool { out = append(out, it); return true }
	x.delayed.Ascend(add)
	for _, t := range x.ready {
		t.Ascend(func(it readyItem) bool { return it.key != 0 || add(it) })
	}
	for _, g := range x.flow.groups {
		g.Ascend(add)
	}
	return out
}

// checkInterns checks the intern tables against the items: each value has
// as many references as items name it, and no other value is interned.
func (x *index) checkInterns() error {
	kinds, keys, needs := make(map[handle]uint32), make(map[handle]uint32), make(map[handle]uint32)
	named := make(map[uint64]uint32)
	for _, it := range x.items() {
		kinds[it.kind]++
		if it.key != 0 {
			keys[it.key]++
		}
		if it.need != 0 {
			needs[it.need]++
		}
		if it.named {
			named[it.seq]++
		}
	}
	if err := checkTable("kind", x.kinds, kinds); err != nil {
		return err
	}
	if err := checkTable("key", x.keys, keys); err != nil {
		return err
	}
	if err := checkTable("need", x.needs.keys, needs); err != nil {
		return err
	}
	for h := range needs {
		if n := x.needs.vals[h]; n == nil || needKeyOf(n.res, n.tags) != x.needs.keys.get(h) {
			return fmt.Errorf("need %d is %+v, interned as %+v", h, n, x.needs.keys.get(h))
		}
	}
	if len(named) != len(x.names) {
		return fmt.Errorf("%d named items, %d names", len(named), len(x.names))
	}
	for seq, n := range named {
		if r := x.names[seq]; r.refs != n || r.id == "" {
			return fmt.Errorf("name of seq %d is %+v, named by %d items", seq, r, n)
		}
	}
	return nil
}

func checkTable[T comparable](name string, tb *interns[T], refs map[handle]uint32) error {
	if tb.size() != len(refs) {
		return fmt.Errorf("%d %ss interned, %d named by items", tb.size(), name, len(refs))
	}
	for h, n := range refs {
		if tb.refs[h] != n {
			return fmt.Errorf("%s %v has %d references, %d items name it", name, tb.get(h), tb.refs[h], n)
		}
		if g, ok := tb.lookup(tb.get(h)); !ok || g != h {
			return fmt.Errorf("%s %v is handle %d, looks up as %d", name, tb.get(h), h, g)
		}
	}
	return nil
}

// TestIndexNamedIDs checks that the items give back every job's id: ones
// the FSM generated (derived from seq), ones submitters named, and a named
// one that looks generated but not for its seq (a store written before the
// prefix was reserved).
func TestIndexNamedIDs(t *testing.T) {
	x := newIndex()
	heads := []*store.JobHead{
		{ID: "job-1", Seq: 1, Queue: DefaultQueue},
		{ID: "report-7", Seq: 2, Queue: DefaultQueue, Key: "tenant-a"},
		{ID: "job-9", Seq: 3, Queue: DefaultQueue},
		{ID: "job-04", Seq: 4, Queue: DefaultQueue},
		{ID: "later", Seq: 5, Queue: DefaultQueue, RunAt: 20},
	}
	for _, h := range heads {
		x.addPending(h, 10)
	}
	if len(x.names) != 4 {
		t.Fatalf("%d names kept, want 4 (all but job-1)", len(x.names))
	}
	x.promote(20)
	kinds := claimKinds(nil, nil, true)
	for _, h := range heads {
		it, ok := x.best(kinds, nil)
		if !ok || x.idOf(it) != h.ID {
			t.Fatalf("next pick = %s %v, want %s", x.idOf(it), ok, h.ID)
		}
		if err := x.checkInterns(); err != nil {
			t.Fatal(err)
		}
		x.removePending(h)
	}
	if len(x.names) != 0 || x.kinds.size() != 0 || x.keys.size() != 0 {
		t.Fatalf("left behind: %d names, %d kinds, %d keys", len(x.names), x.kinds.size(), x.keys.size())
	}
}

// TestIndexInternsFollowTheItems drives random adds, removals, promotions
// and keys closing and reopening through an index, checking the intern
// tables after each step, and that they are empty once no job is pending.
func TestIndexInternsFollowTheItems(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	queues, types, keys := []string{"default", "q1"}, []string{"", "img"}, []string{"", "a", "b", "c"}
	for round := range 50 {
		x := newIndex()
		for _, q := range queues {
			x.flow.limits[q] = &store.QueueLimits{KeyConcurrency: 1}
		}
		pending := make(map[uint64]*store.JobHead)
		now := int64(0)
		for step := range 200 {
			switch op := r.Intn(10); {
			case op < 5:
				seq := uint64(step + 1)
				h := &store.JobHead{ID: jobID(seq), Seq: seq, Priority: r.Intn(3), RunAt: now + int64(r.Intn(3)),
					Queue: queues[r.Intn(len(queues))], Type: types[r.Intn(len(types))], Key: keys[r.Intn(len(keys))]}
				if r.Intn(3) == 0 {
					h.ID = fmt.Sprint("mine-", seq)
				}
				if r.Intn(3) == 0 {
					h.Resources, h.Tags = store.Resources{Slots: 1 + r.Intn(2)}, []string{"gpu"}[:r.Intn(2)]
				}
				x.addPending(h, now)
				pending[seq] = h
			case op < 8 && len(pending) > 0:
				seqs := sortedSeqs(pending)
				seq := seqs[r.Intn(len(seqs))]
				x.removePending(pending[seq])
				delete(pending, seq)
			case op < 9:
				now++
				x.promote(now)
			default: // a key reaches its limit of 1, or leaves it
				k := qkey{queues[r.Intn(len(queues))], keys[1+r.Intn(len(keys)-1)]}
				if x.flow.keyRun[k] > 0 {
					x.run(k.queue, k.key, -1)
				} else {
					x.run(k.queue, k.key, 1)
				}
			}
			if err := x.checkInterns(); err != nil {
				t.Fatalf("round %d, step %d: %v", round, step, err)
			}
			if got := len(x.items()); got != len(pending) {
				t.Fatalf("round %d, step %d: %d items, %d pending jobs", round, step, got, len(pending))
			}
		}
		for _, seq := range sortedSeqs(pending) {
			x.removePending(pending[seq])
		}
		if x.kinds.size()+x.keys.size()+x.needs.keys.size()+len(x.names) != 0 {
			t.Fatalf("round %d: with nothing pending, %d kinds, %d keys, %d needs, %d names interned",
				round, x.kinds.size(), x.keys.size(), x.needs.keys.size(), len(x.names))
		}
	}
}

func sortedSeqs(m map[uint64]*store.JobHead) []uint64 {
	out := make([]uint64, 0, len(m))
	for s := range m {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}
