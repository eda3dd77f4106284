package fsm

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/workron/workron/store"
)

// pickFairByScan is the fair claim order written out the slow way: the
// first queue (in the claim's order) that is not paused or held and has a
// job fit takes; in it, if an open key has jobs, the first participant in
// rotation order from the queue's place that has such a job, and its best;
// else the queue's best by readyLess.
func pickFairByScan(x *index, kinds [][]kind, fit func(*need) bool) (readyItem, bool) {
	for _, ks := range kinds {
		q := ks[0].queue
		if x.paused[q] || x.flow.queueHeld(q) {
			continue
		}
		byKey := make(map[string][]readyItem) // every job of the queue's kinds a claim may take, by key
		keyed := false
		for _, k := range ks {
			if t := x.ready[k]; t != nil {
				t.Ascend(func(it readyItem) bool {
					if it.key == 0 {
						byKey[""] = append(byKey[""], it)
					}
					return true
				})
			}
			for gk, g := range x.flow.groups {
				if gk.kind != k || !x.flow.keyOpen(qkey{q, gk.key}) {
					continue
				}
				keyed = true
				g.Ascend(func(it readyItem) bool {
					byKey[gk.key] = append(byKey[gk.key], it)
					return true
				})
			}
		}
		best := func(its []readyItem) (readyItem, bool) {
			var top readyItem
			found := false
			for _, it := range its {
				if (it.need == 0 || fit == nil || fit(x.needOf(it))) && (!found || readyLess(it, top)) {
					top, found = it, true
				}
			}
			return top, found
		}
		if !keyed {
			if it, ok := best(byKey[""]); ok {
				return it, true
			}
			continue
		}
		keys := make([]string, 0, len(byKey))
		for k := range byKey {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		rot := x.flow.rot[q]
		inclusive := rot.Used < x.flow.weight(q, rot.Key)
		first := len(keys)
		for i, k := range keys {
			if k > rot.Key || (inclusive && k == rot.Key) {
				first = i
				break
			}
		}
		for i := range keys {
			if it, ok := best(byKey[keys[(first+i)%len(keys)]]); ok {
				return it, true
			}
		}
	}
	return readyItem{}, false
}

// TestFairPickAgreesWithScan checks the fair picker against a scan of
// every ready job, over random queues, types, keys (some at their limit),
// resource needs, weights and places in the rotation.
func TestFairPickAgreesWithScan(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	queues, types, keys := []string{"default", "q1"}, []string{"", "img"}, []string{"", "", "a", "b", "c", "d"}
	for round := 0; round < 300; round++ {
		x := newIndex()
		for _, q := range queues {
			l := &store.QueueLimits{KeyConcurrency: 1, KeyWeights: map[string]int{"b": 1 + r.Intn(3)}}
			x.flow.limits[q] = l
			x.flow.rot[q] = store.Rotation{Key: keys[r.Intn(len(keys))], Used: int64(r.Intn(3))}
		}
		for i := 0; i < 1+r.Intn(40); i++ {
			h := &store.JobHead{
				ID: fmt.Sprintf("job-%d", i), Seq: uint64(i + 1), Priority: r.Intn(3), RunAt: int64(r.Intn(5)),
				Queue: queues[r.Intn(len(queues))], Type: types[r.Intn(len(types))], Key: keys[r.Intn(len(keys))],
			}
			if r.Intn(3) == 0 {
				h.Resources = store.Resources{Slots: 1 + r.Intn(4)}
			}
			x.addPending(h, 10)
		}
		for range r.Intn(3) { // some keys at their limit of 1
			x.run(queues[r.Intn(len(queues))], keys[2+r.Intn(4)], 1)
		}
		x.gx.setWorker(&store.Worker{ID: "w", Slots: r.Intn(4)})
		kinds := claimKinds([]string{queues[r.Intn(2)], queues[r.Intn(2)]}, []string{"img"}[:r.Intn(2)], r.Intn(2) == 0)
		for name, fit := range map[string]func(*need) bool{"any": nil, "worker": x.fitOf("w")} {
			want, wantOK := pickFairByScan(x, kinds, fit)
			got, gotOK := x.pick(kinds, fit, true)
			if gotOK != wantOK || x.idOf(got) != x.idOf(want) {
				t.Fatalf("round %d, fit %s: fair pick = %s %v, a scan = %s %v", round, name, x.idOf(got), gotOK, x.idOf(want), wantOK)
			}
		}
	}
}

// BenchmarkPick times the picker alone (no store): take the next job of
// 30,000 due ones, then put one like it back, for jobs without keys and of
// 10,000 keys, by priority and fair. It measures; it asserts no speed.
func BenchmarkPick(b *testing.B) {
	for _, bc := range []struct {
		name        string
		keyed, fair bool
	}{{"NoKeys", false, false}, {"NoKeysFair", false, true}, {"Keys", true, false}, {"KeysFair", true, true}} {
		b.Run(bc.name, func(b *testing.B) {
			x := newIndex()
			seq := uint64(0)
			add := func(key string, prio int) {
				seq++
				x.addPending(&store.JobHead{ID: fmt.Sprint("job-", seq), Seq: seq, Priority: prio, Queue: DefaultQueue, Key: key}, 0)
			}
			for round := range 3 {
				for k := range 10000 {
					key := ""
					if bc.keyed {
						key = fmt.Sprint("tenant-", k)
					}
					add(key, round)
				}
			}
			kinds := claimKinds(nil, nil, true)
			fit := x.fitOf("w")
			b.ReportAllocs()
			for b.Loop() {
				it, ok := x.pick(kinds, fit, bc.fair)
				if !ok {
					b.Fatal("nothing to pick")
				}
				key := x.keyOf(it) // before removeReady drops it
				x.removeReady(it)
				if bc.fair && x.hasKeys(kinds[0]) {
					x.flow.rot[DefaultQueue] = store.Rotation{Key: key, Used: 1}
				}
				add(key, it.prio)
			}
		})
	}
}
