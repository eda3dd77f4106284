package fsm_test

import (
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// TestClaimSaysHowLongLimitsHeldEachJob: a claim's Result.Held is, for each
// job of a queue with limits, the time since it became due that its queue
// or its key was at a limit; an overlap of both counts once.
func TestClaimSaysHowLongLimitsHeldEachJob(t *testing.T) {
	claim := func(h *harness) fsm.Result {
		h.t.Helper()
		return h.ok(claimCmd(fsm.Claim{WorkerID: "w", Max: 1, LeaseTTL: int64(time.Hour)}))
	}
	held := func(t *testing.T, r fsm.Result, want time.Duration) {
		t.Helper()
		if len(r.Jobs) != 1 {
			t.Fatalf("claimed %d jobs, want 1", len(r.Jobs))
		}
		got, ok := r.Held[r.Jobs[0].ID]
		if !ok || time.Duration(got) != want {
			t.Errorf("job %s held %v (recorded %v), want %v", r.Jobs[0].ID, time.Duration(got), ok, want)
		}
	}

	t.Run("AKeyAtItsLimit", func(t *testing.T) {
		h := setup(t)
		h.ok(setLimits(fsm.DefaultQueue, store.QueueLimits{KeyConcurrency: 1}))
		h.submit(keyed("acme", 0), keyed("acme", 0))
		first := claim(h.at(time.Second))
		held(t, first, 0)
		h.at(5 * time.Second).ok(succeed(first.Jobs[0].ID, first.Jobs[0].Lease))
		held(t, claim(h.at(6*time.Second)), 4*time.Second) // held from 1s to 5s
	})

	t.Run("QueueAndKeyAtOnceCountOnce", func(t *testing.T) {
		h := setup(t)
		h.ok(setLimits(fsm.DefaultQueue, store.QueueLimits{Concurrency: 1, KeyConcurrency: 1}))
		h.submit(keyed("acme", 0), keyed("acme", 0), keyed("globex", 0))
		a := claim(h.at(time.Second))
		h.at(5 * time.Second).ok(succeed(a.Jobs[0].ID, a.Jobs[0].Lease))
		b := claim(h.at(6 * time.Second))
		held(t, b, 4*time.Second) // queue and key both held it from 1s to 5s
		h.at(7 * time.Second).ok(succeed(b.Jobs[0].ID, b.Jobs[0].Lease))
		held(t, claim(h.at(8*time.Second)), 5*time.Second) // the queue held it 1s-5s and 6s-7s
	})

	t.Run("ARateLimit", func(t *testing.T) {
		h := setup(t)
		h.ok(setLimits(fsm.DefaultQueue, store.QueueLimits{Rate: store.Rate{Count: 1, Per: int64(10 * time.Second)}, Burst: 1}))
		h.submit(fsm.NewJob{Command: "a"}, fsm.NewJob{Command: "b"})
		held(t, claim(h), 0)
		if r := claim(h.at(2 * time.Second)); len(r.Jobs) != 0 {
			t.Fatalf("claimed %d jobs out of tokens", len(r.Jobs))
		}
		held(t, claim(h.at(12*time.Second)), 10*time.Second) // out of tokens from 0s to 10s
	})

	t.Run("ADelayedJobCountsFromItsRunTime", func(t *testing.T) {
		h := setup(t)
		h.ok(setLimits(fsm.DefaultQueue, store.QueueLimits{Concurrency: 1}))
		h.submit(fsm.NewJob{Command: "a"})
		later := fsm.NewJob{Command: "b", RunAt: ns(t0.Add(3 * time.Second))}
		h.submit(later)
		a := claim(h.at(time.Second))
		h.at(5 * time.Second).ok(succeed(a.Jobs[0].ID, a.Jobs[0].Lease))
		held(t, claim(h.at(6*time.Second)), 2*time.Second) // due at 3s, held until 5s
	})

	t.Run("NoneForAQueueWithoutLimits", func(t *testing.T) {
		h := setup(t)
		h.submit(keyed("acme", 0))
		if r := claim(h.at(time.Second)); len(r.Jobs) != 1 || r.Held != nil {
			t.Errorf("claimed %d jobs with held %v, want one and none", len(r.Jobs), r.Held)
		}
	})
}
