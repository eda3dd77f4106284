package fsm

import (
	"math/rand"
	"runtime"
	"slices"
	"testing"
)

func TestItemTree(t *testing.T) {
	t.Run("ReadsInTheOrderOfItsLess", func(t *testing.T) {
		for _, tc := range []struct {
			name        string
			less, after func(a, b readyItem) bool
		}{{"readyLess", readyLess, readyAfter}, {"delayedLess", delayedLess, delayedAfter}} {
			t.Run(tc.name, func(t *testing.T) { checkItemTreeOrder(t, tc.less, tc.after) })
		}
	})
	t.Run("AfterIsLessSwapped", func(t *testing.T) {
		rng := rand.New(rand.NewSource(2))
		ready := func() readyItem {
			return readyItem{prio: rng.Intn(3) - 1, runAt: int64(rng.Intn(3)), seq: uint64(rng.Intn(3))}
		}
		lease := func() leaseItem {
			return leaseItem{deadline: int64(rng.Intn(3)), id: []string{"a", "b", "job-1"}[rng.Intn(3)]}
		}
		for range 1000 {
			a, b := ready(), ready()
			if readyAfter(a, b) != readyLess(b, a) {
				t.Fatalf("readyAfter(%v, %v) = %v, want readyLess(b, a)", a, b, readyAfter(a, b))
			}
			if delayedAfter(a, b) != delayedLess(b, a) {
				t.Fatalf("delayedAfter(%v, %v) = %v, want delayedLess(b, a)", a, b, delayedAfter(a, b))
			}
			la, lb := lease(), lease()
			if leaseAfter(la, lb) != leaseLess(lb, la) {
				t.Fatalf("leaseAfter(%v, %v) = %v, want leaseLess(b, a)", la, lb, leaseAfter(la, lb))
			}
		}
	})
	t.Run("KeepsAnInOrderFillCompact", func(t *testing.T) {
		// Jobs come in mostly in order: the layout of itemTree keeps
		// the nodes such a fill leaves behind full (itemtree.go). The
		// item is 48 bytes; in a btree in order it took over 100.
		const n = 200_000
		before := liveHeap()
		tr := newItemTree(readyAfter)
		for i := range n {
			tr.ReplaceOrInsert(readyItem{prio: 1, runAt: int64(i / 7), seq: uint64(i + 1)})
		}
		per := float64(liveHeap()-before) / n
		runtime.KeepAlive(tr)
		if per > 64 {
			t.Fatalf("%d items in order take %.1f bytes of heap each, want at most 64", n, per)
		}
		t.Logf("%.1f bytes of heap an item", per)
	})
}

// checkItemTreeOrder applies random inserts, replacements and deletions
// to an itemTree made with after and a slice sorted by less alike, and
// compares every read.
func checkItemTreeOrder(t *testing.T, less, after func(a, b readyItem) bool) {
	rng := rand.New(rand.NewSource(1))
	tr := newItemTree(after)
	var model []readyItem // sorted by less; no two equal
	cmp := func(a, b readyItem) int {
		switch {
		case less(a, b):
			return -1
		case less(b, a):
			return 1
		}
		return 0
	}
	randItem := func() readyItem {
		// Few distinct values, so that inserts replace and items tie on
		// priority and run time.
		return readyItem{prio: rng.Intn(3), runAt: int64(rng.Intn(20)), seq: uint64(rng.Intn(300)), need: handle(rng.Intn(4))}
	}
	for step := range 4_000 {
		switch op := rng.Intn(10); {
		case op < 5:
			it := randItem()
			old, replaced := tr.ReplaceOrInsert(it)
			i, found := slices.BinarySearchFunc(model, it, cmp)
			if replaced != found || (found && old != model[i]) {
				t.Fatalf("step %d: ReplaceOrInsert(%v) = %v, %v; want %v", step, it, old, replaced, found)
			}
			if found {
				model[i] = it
			} else {
				model = slices.Insert(model, i, it)
			}
		case op < 8:
			it := randItem()
			old, deleted := tr.Delete(it)
			i, found := slices.BinarySearchFunc(model, it, cmp)
			if deleted != found || (found && old != model[i]) {
				t.Fatalf("step %d: Delete(%v) = %v, %v; want %v", step, it, old, deleted, found)
			}
			if found {
				model = slices.Delete(model, i, i+1)
			}
		default:
			got, ok := tr.DeleteMin()
			if ok != (len(model) > 0) || (ok && got != model[0]) {
				t.Fatalf("step %d: DeleteMin = %v, %v; want the first of %v", step, got, ok, model)
			}
			if ok {
				model = model[1:]
			}
		}
		checkItemTreeReads(t, step, rng, tr, model, cmp)
	}
}

// checkItemTreeReads compares Len, Min, Ascend and AscendGreaterOrEqual
// (from a random pivot, stopped after a random count) with the model.
func checkItemTreeReads(t *testing.T, step int, rng *rand.Rand, tr *itemTree[readyItem], model []readyItem, cmp func(a, b readyItem) int) {
	t.Helper()
	if tr.Len() != len(model) {
		t.Fatalf("step %d: Len = %d, want %d", step, tr.Len(), len(model))
	}
	if got, ok := tr.Min(); ok != (len(model) > 0) || (ok && got != model[0]) {
		t.Fatalf("step %d: Min = %v, %v; want the first of %v", step, got, ok, model)
	}
	var all []readyItem
	tr.Ascend(func(it readyItem) bool { all = append(all, it); return true })
	if !slices.Equal(all, model) && (len(all) > 0 || len(model) > 0) {
		t.Fatalf("step %d: Ascend = %v, want %v", step, all, model)
	}
	pivot := readyItem{prio: rng.Intn(3), runAt: int64(rng.Intn(20)), seq: uint64(rng.Intn(300))}
	stop := rng.Intn(10) + 1
	var got []readyItem
	tr.AscendGreaterOrEqual(pivot, func(it readyItem) bool {
		got = append(got, it)
		return len(got) < stop
	})
	i, _ := slices.BinarySearchFunc(model, pivot, cmp)
	want := model[i:min(i+stop, len(model))]
	if !slices.Equal(got, want) && (len(got) > 0 || len(want) > 0) {
		t.Fatalf("step %d: AscendGreaterOrEqual(%v) stopped after %d = %v, want %v", step, pivot, stop, got, want)
	}
}

// liveHeap collects and returns the heap in use.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
