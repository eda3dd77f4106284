package fsm

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/workron/workron/store"
)

// pickByScan is the claim order written out the slow way: from the first
// unpaused queue with a job that fits, the least job by readyLess among all
// its kinds' jobs that fit.
func pickByScan(x *index, kinds [][]kind, fit func(*need) bool) (readyItem, bool) {
	for _, ks := range kinds {
		if len(ks) == 0 || x.paused[ks[0].queue] {
			continue
		}
		var (
			top   readyItem
			found bool
		)
		for _, k := range ks {
			if t := x.ready[k]; t != nil {
				t.Ascend(func(it readyItem) bool {
					if (it.need == nil || fit == nil || fit(it.need)) && (!found || readyLess(it, top)) {
						top, found = it, true
					}
					return true
				})
			}
		}
		if found {
			return top, true
		}
	}
	return readyItem{}, false
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
			if gotOK != wantOK || got.id != want.id {
				t.Fatalf("round %d, fit %s: best = %s %v, a scan of every job = %s %v", round, name, got.id, gotOK, want.id, wantOK)
			}
		}
		if got, want := fmt.Sprint(x.bestFit(kinds, "w")), fmt.Sprint(x.best(kinds, fitW)); got != want {
			t.Fatalf("round %d: bestFit = %s, best with the worker's fit = %s", round, got, want)
		}
	}
}
