package fsm

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/workron/workron/store"
)

// RebuiltIndexes rebuilds the in-memory indexes from f's store both ways
// (from the search index's counts and the live jobs' heads, as a start
// does, and from every job's head, as before) and returns each's dump, and
// the dump of f's own indexes, kept by applying (tests only). withHeld
// includes the held clocks, which a rebuild restarts.
func RebuiltIndexes(f *FSM, withHeld bool) (fromIndex, fromScan, applied string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	applied = dumpIndex(f.idx, withHeld)
	err = f.st.View(func(tx *store.Tx) error {
		a, err := rebuild(tx, f.lastNow, false, f.logger)
		if err != nil {
			return err
		}
		b, err := rebuild(tx, f.lastNow, true, f.logger)
		if err != nil {
			return err
		}
		fromIndex, fromScan = dumpIndex(a, withHeld), dumpIndex(b, withHeld)
		return nil
	})
	return fromIndex, fromScan, applied, err
}

// dumpIndex writes x's contents in a canonical order, items by their
// values rather than their intern handles.
func dumpIndex(x *index, withHeld bool) string {
	var b strings.Builder
	item := func(it readyItem) string {
		held := int64(0)
		if withHeld {
			held = it.heldBase
		}
		return fmt.Sprintf("{%d %d %d %d %v %q %+v %s}", it.prio, it.runAt, it.seq, held, x.kindOf(it), x.keyOf(it), x.needOf(it), x.idOf(it))
	}
	tree := func(t *itemTree[readyItem]) string {
		var out []string
		t.Ascend(func(it readyItem) bool { out = append(out, item(it)); return true })
		return strings.Join(out, " ")
	}
	counts := map[string]map[store.Status]int{}
	for q, m := range x.counts {
		for s, n := range m {
			if n != 0 {
				if counts[q] == nil {
					counts[q] = map[store.Status]int{}
				}
				counts[q][s] = n
			}
		}
	}
	fmt.Fprintf(&b, "counts %v\npaused %v\n", counts, x.paused)
	for _, k := range slices.SortedFunc(maps.Keys(x.ready), func(a, b kind) int { return strings.Compare(a.queue+"\x00"+a.typ, b.queue+"\x00"+b.typ) }) {
		if t := tree(x.ready[k]); t != "" {
			fmt.Fprintf(&b, "ready %v: %s\n", k, t)
		}
	}
	fmt.Fprintf(&b, "delayed %s\n", tree(x.delayed))
	var leases []string
	x.leases.Ascend(func(it leaseItem) bool { leases = append(leases, fmt.Sprintf("%+v", it)); return true })
	fmt.Fprintf(&b, "leases %v\nleaseOf %v\nbyWorker %v\n", leases, x.leaseOf, x.byWorker)
	fx := x.flow
	fmt.Fprintf(&b, "running %v\nkeyRun %v\nready %v\nkeyReady %v\nkeyFull %v\nkeyUntil %v\nqUntil %v\n",
		fx.running, fx.keyRun, fx.ready, fx.keyReady, fx.keyFull, fx.keyUntil, fx.qUntil)
	fmt.Fprintf(&b, "types %v\nqPause %v\nkeyPause %v\nrot %v\n", fx.types, fx.qPause, fx.keyPause, fx.rot)
	for _, g := range slices.SortedFunc(maps.Keys(fx.groups), func(a, b gkey) int {
		return strings.Compare(a.queue+"\x00"+a.typ+"\x00"+a.key, b.queue+"\x00"+b.typ+"\x00"+b.key)
	}) {
		if t := tree(fx.groups[g]); t != "" {
			fmt.Fprintf(&b, "group %v: %s\n", g, t)
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(fx.byKey), func(a, b kind) int { return strings.Compare(a.queue+"\x00"+a.typ, b.queue+"\x00"+b.typ) }) {
		var keys []string
		fx.byKey[k].Ascend(func(s string) bool { keys = append(keys, s); return true })
		if len(keys) > 0 {
			fmt.Fprintf(&b, "byKey %v: %q\n", k, keys)
		}
	}
	var waits []string
	fx.waits.Ascend(func(w waitItem) bool { waits = append(waits, fmt.Sprintf("%+v", w)); return true })
	fmt.Fprintf(&b, "waits %v\n", waits)
	if withHeld {
		fmt.Fprintf(&b, "qHeld %v\nkHeld %v\n", fx.qHeld, fx.kHeld)
	}
	fmt.Fprintf(&b, "gang used %v\nreserved %v\nopen %v\n", x.gx.used, x.gx.reservedOf, slices.Sorted(maps.Keys(x.gx.open)))
	return b.String()
}

// RebuildByScan rebuilds the in-memory indexes of st from every job's head,
// as a start did before the search index counted them, and drops them
// (BenchmarkStart times it beside New).
func RebuildByScan(st *store.Store) error {
	return st.View(func(tx *store.Tx) error {
		_, err := rebuild(tx, tx.LastNow(), true, slog.New(slog.DiscardHandler))
		return err
	})
}

// IndexDump is dumpIndex of f's in-memory indexes, held clocks left out
// (tests only).
func IndexDump(f *FSM) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return dumpIndex(f.idx, false)
}
