package fsm

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/workron/workron/store"
)

// pickByScan is the claim order written out the slow way: every ready job
// that fits, sorted by the claim's preference of its queue and then by
// readyLess; the first wins.
func pickByScan(x *index, kinds [][]kind, fit func(*need) bool) (readyItem, bool) {
	rank := make(map[kind]int) // a kind's queue's place in the claim, for unpaused queues
	for i := len(kinds) - 1; i >= 0; i-- {
		for _, k := range kinds[i] {
			if !x.paused[k.queue] {
				rank[k] = i
			}
		}
	}
	var all []readyItem
	for k := range rank {
		if t := x.ready[k]; t != nil {
			t.Ascend(func(it readyItem) bool {
				if it.need == 0 || fit == nil || fit(x.needOf(it)) {
					all = append(all, it)
				}
				return true
			})
		}
	}
	if len(all) == 0 {
		return readyItem{}, false
	}
	slices.SortFunc(all, func(a, b readyItem) int {
		if ra, rb := rank[x.kindOf(a)], rank[x.kindOf(b)]; ra != rb {
			return ra - rb
		}
		if readyLess(a, b) {
			return -1
		}
		return 1
	})
	return all[0], true
}

// TestBestAgreesWithScan checks the one claim-order picker that claims
// (bestFit) and the long-polls' hint (Claimable: best with no fit) share,
// against a scan of every ready job: with a worker's fit, with none, and
// across queues in the claim's order of preference, some paused.
func TestBestAgreesWithScan(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	queues, types := []string{"default", "q1", "q2"}, []string{"", "img", "gpu"}
	for round := 0; round < 200; round++ {
		x := newIndex()
		for i := 0; i < 1+r.Intn(40); i++ {
			h := &store.JobHead{
				ID: fmt.Sprintf("job-%d", i), Seq: uint64(i + 1), Priority: r.Intn(3), RunAt: int64(r.Intn(5)),
				Queue: queues[r.Intn(len(queues))], Type: types[r.Intn(len(types))],
			}
			if r.Intn(2) == 0 {
				h.Resources = store.Resources{Slots: 1 + r.Intn(4)}
			}
			x.addPending(h, 10)
		}
		if r.Intn(3) == 0 {
			x.paused[queues[r.Intn(len(queues))]] = true
		}
		x.gx.setWorker(&store.Worker{ID: "w", Slots: r.Intn(4)})
		kinds := claimKinds([]string{queues[r.Intn(3)], queues[r.Intn(3)]}, []string{"img", "gpu"}[:r.Intn(3)], r.Intn(2) == 0)
		fitW := func(n *need) bool { return x.fits("w", n) }
		for name, fit := range map[string]func(*need) bool{"any": nil, "worker": fitW} {
			want, wantOK := pickByScan(x, kinds, fit)
			got, gotOK := x.best(kinds, fit)
			if gotOK != wantOK || x.idOf(got) != x.idOf(want) {
				t.Fatalf("round %d, fit %s: best = %s %v, a scan of every job = %s %v", round, name, x.idOf(got), gotOK, x.idOf(want), wantOK)
			}
		}
		if got, want := fmt.Sprint(x.bestFit(kinds, "w")), fmt.Sprint(x.best(kinds, fitW)); got != want {
			t.Fatalf("round %d: bestFit = %s, best with the worker's fit = %s", round, got, want)
		}
	}
}
