//go:build !workron_protocol1 && !workron_protocol2

package fsm_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

func pruneCmd(after []byte, limit int) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpPruneBuckets, PruneBuckets: &fsm.PruneBuckets{After: after, Limit: limit}}
}

// pruneAll runs prune_buckets of limit from the first bucket until one
// reaches the last, and returns how many buckets they deleted.
func (h *harness) pruneAll(limit int) int {
	h.t.Helper()
	var after []byte
	n := 0
	for i := 0; ; i++ {
		if i > 1000 {
			h.t.Fatal("prune_buckets never reached the last bucket")
		}
		r := h.ok(pruneCmd(after, limit))
		n += r.Deleted
		if r.Next == nil {
			return n
		}
		after = r.Next
	}
}

func TestPruneBuckets(t *testing.T) {
	// One token a minute, two at most: a key that took one is full again a
	// minute later.
	limits := store.QueueLimits{KeyRate: store.Rate{Count: 1, Per: int64(time.Minute)}, KeyBurst: 2}

	t.Run("AFullBucketGoesAndOneRefillingStays", func(t *testing.T) {
		h := setup(t)
		h.ok(setLimits(fsm.DefaultQueue, limits))
		h.submit(keyed("a", 0), keyed("b", 0))
		if got := h.claimN("w", 1); len(got) != 1 {
			t.Fatalf("claimed %v, want one job", got)
		}
		h.at(30 * time.Second)
		if got := h.claimN("w", 1); len(got) != 1 {
			t.Fatalf("claimed %v, want one job", got)
		}
		if n := h.f.KeyBuckets(); n != 2 {
			t.Fatalf("%d key buckets, want 2", n)
		}
		h.at(time.Minute - 1)
		if n := h.pruneAll(fsm.MaxPruneBuckets); n != 0 {
			t.Fatalf("pruned %d buckets before either was full", n)
		}
		h.at(time.Minute)
		if n := h.pruneAll(fsm.MaxPruneBuckets); n != 1 || h.f.KeyBuckets() != 1 {
			t.Fatalf("pruned %d, %d left, want the first key's full bucket pruned and the other kept", n, h.f.KeyBuckets())
		}
		checkIndexes(t, h.f)
		g := snapshotRestore(t, h.f)
		if n := g.KeyBuckets(); n != 1 {
			t.Fatalf("restored %d key buckets, want 1", n)
		}
		h.at(90 * time.Second)
		if n := h.pruneAll(fsm.MaxPruneBuckets); n != 1 || h.f.KeyBuckets() != 0 {
			t.Fatalf("pruned %d, %d left, want the second bucket pruned once full", n, h.f.KeyBuckets())
		}
		if n := snapshotRestore(t, h.f).KeyBuckets(); n != 0 {
			t.Fatalf("restored %d key buckets after pruning all, want 0", n)
		}
	})

	t.Run("PagesWalkEveryBucketOnce", func(t *testing.T) {
		h := setup(t)
		h.ok(setLimits(fsm.DefaultQueue, limits))
		h.ok(setLimits("other", store.QueueLimits{Rate: perSecond(1), KeyRate: limits.KeyRate, KeyBurst: 2}))
		var jobs []fsm.NewJob
		for i := range 5 {
			jobs = append(jobs, keyed(fmt.Sprint("k", i), 0))
			j := keyed(fmt.Sprint("k", i), 0)
			j.Queue = "other"
			jobs = append(jobs, j)
		}
		h.submit(jobs...)
		h.claim(fsm.Claim{WorkerID: "w", Max: 20})
		h.claim(fsm.Claim{WorkerID: "w", Max: 20, Queues: []string{"other"}})
		if n := h.f.KeyBuckets(); n != 6 { // "other" hands out one token a second
			t.Fatalf("%d key buckets, want 6", n)
		}
		h.at(time.Hour)
		r := h.ok(pruneCmd(nil, 2))
		if r.Deleted != 2 || r.Next == nil {
			t.Fatalf("first page deleted %d, next %q, want 2 and more to come", r.Deleted, r.Next)
		}
		// Eleven stored buckets (one queue's own): six pages of two.
		if n := r.Deleted + h.pruneAllFrom(r.Next, 2); n != 6 || h.f.KeyBuckets() != 0 {
			t.Fatalf("pruned %d, %d left, want all 6", n, h.f.KeyBuckets())
		}
	})

	t.Run("ALimitOutOfBoundsIsRefused", func(t *testing.T) {
		h := setup(t)
		for _, limit := range []int{0, -1, fsm.MaxPruneBuckets + 1} {
			r := h.one(pruneCmd(nil, limit))
			var ve *fsm.ValidationError
			if !errors.As(r.Err, &ve) || ve.Field != "limit" {
				t.Errorf("limit %d: err %v, want a ValidationError of limit", limit, r.Err)
			}
		}
	})

	t.Run("RoundTripsThroughEncoding", func(t *testing.T) {
		e := &fsm.Entry{Now: 1, Cmds: []fsm.Cmd{pruneCmd([]byte("q\x00ka"), 7)}}
		data, err := fsm.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fsm.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		p := got.Cmds[0].PruneBuckets
		if got.Cmds[0].Op != fsm.OpPruneBuckets || p == nil || string(p.After) != "q\x00ka" || p.Limit != 7 {
			t.Fatalf("decoded %+v", got.Cmds[0])
		}
		if p := e.Cmds[0].Protocol(); p != 3 {
			t.Fatalf("protocol %d, want 3", p)
		}
		// The entry protocol2_prune_test.go checks a protocol 2 binary refuses.
		if e, err := fsm.Decode(pruneEntry); err != nil || e.Cmds[0].Op != fsm.OpPruneBuckets || e.Cmds[0].PruneBuckets.Limit != 1 {
			t.Fatalf("Decode of %q: %+v, %v", pruneEntry, e, err)
		}
	})
}

// pruneAllFrom is pruneAll starting after after.
func (h *harness) pruneAllFrom(after []byte, limit int) int {
	h.t.Helper()
	n := 0
	for after != nil {
		r := h.ok(pruneCmd(after, limit))
		n += r.Deleted
		after = r.Next
	}
	return n
}

// TestPruneBucketsChangesNoDecision runs the same random submits and
// claims through two FSMs over keys with rate limits, one of them pruning
// its buckets at random moments with random page sizes, and checks that
// every claim takes the same jobs in both; a third FSM applying the
// pruning one's entries ends with its state, and a snapshot of it restores
// the same state and indexes.
func TestPruneBucketsChangesNoDecision(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("Seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 23))
			plain, pruned, replica := setup(t), setup(t), setup(t)
			limits := store.QueueLimits{KeyRate: store.Rate{Count: 1, Per: int64(time.Second)}, KeyBurst: 3}
			both := func(c fsm.Cmd) (fsm.Result, fsm.Result) {
				t.Helper()
				replica.ok(c)
				return plain.ok(c), pruned.ok(c)
			}
			both(setLimits(fsm.DefaultQueue, limits))
			var after []byte
			prunedAny := 0
			now, id := time.Duration(0), 0
			for step := range 400 {
				now += time.Duration(rng.IntN(800)) * time.Millisecond
				plain.at(now)
				pruned.at(now)
				replica.at(now)
				if rng.IntN(3) == 0 {
					c := pruneCmd(after, 1+rng.IntN(4))
					r, rr := pruned.ok(c), replica.ok(c)
					if r.Deleted != rr.Deleted || string(r.Next) != string(rr.Next) {
						t.Fatalf("step %d: pruned %d, next %q; the replica %d, %q", step, r.Deleted, r.Next, rr.Deleted, rr.Next)
					}
					after = r.Next
					prunedAny += r.Deleted
				}
				if rng.IntN(2) == 0 {
					var jobs []fsm.NewJob
					for range 1 + rng.IntN(5) {
						id++
						j := keyed(fmt.Sprint("k", rng.IntN(5)), 0)
						j.ID = fmt.Sprint("j", id)
						jobs = append(jobs, j)
					}
					both(submit(jobs...))
					continue
				}
				c := claimCmd(fsm.Claim{WorkerID: "w", Max: 1 + rng.IntN(6), LeaseTTL: int64(time.Hour)})
				a, b := both(c)
				if !slices.Equal(jobIDs(a.Jobs), jobIDs(b.Jobs)) {
					t.Fatalf("step %d: claimed %v without pruning, %v with", step, jobIDs(a.Jobs), jobIDs(b.Jobs))
				}
			}
			if prunedAny == 0 {
				t.Fatal("pruned no bucket: the test checks nothing")
			}
			if digest(t, replica.f) != digest(t, pruned.f) {
				t.Fatal("a replica applying the same entries has another state")
			}
			checkIndexes(t, pruned.f)
			snapshotRestore(t, pruned.f)
		})
	}
}
