package fsm_test

import (
	"maps"
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

	rateLimited := func(j *store.Job, d time.Duration) fsm.Cmd {
		return report(fsm.Report{JobID: j.ID, Lease: j.Lease, Error: "429", RateLimitedFor: int64(d)})
	}
	claimAll := func(h *harness, fair bool) fsm.Result {
		h.t.Helper()
		return h.ok(claimCmd(fsm.Claim{WorkerID: "w", Max: 10, LeaseTTL: int64(time.Hour), Fair: fair}))
	}
	allHeld := func(t *testing.T, r fsm.Result, n int, want time.Duration) {
		t.Helper()
		if len(r.Jobs) != n {
			t.Fatalf("claimed %d jobs, want %d", len(r.Jobs), n)
		}
		for _, j := range r.Jobs {
			if got, ok := r.Held[j.ID]; !ok || time.Duration(got) != want {
				t.Errorf("job %s held %v (recorded %v), want %v", j.ID, time.Duration(got), ok, want)
			}
		}
	}

	// A pause a rate-limited attempt asked for is a limit like the others:
	// its key's jobs count under key_paused while it lasts, and the claim
	// after it says how long it held them, in a queue without limits too.
	t.Run("AKeyPausedByARateLimitedAttempt", func(t *testing.T) {
		h := setup(t)
		h.submit(keyed("acme", 0), keyed("acme", 0), keyed("globex", 0))
		first := claim(h.at(time.Second))
		if first.Held != nil {
			t.Errorf("a queue without limits or pauses recorded %v", first.Held)
		}
		h.at(2 * time.Second).ok(rateLimited(first.Jobs[0], 10*time.Second)) // acme paused from 2s to 12s
		if fl := h.f.QueueLimits(fsm.DefaultQueue); fl.Held["key_paused"] != 2 {
			t.Errorf("held %v while acme is paused, want key_paused 2", fl.Held)
		}
		g := claimAll(h.at(3*time.Second), false) // globex, never held
		if len(g.Jobs) != 1 || g.Jobs[0].ConcurrencyKey != "globex" || g.Held != nil {
			t.Fatalf("claimed %d jobs (%v held) while acme is paused, want globex's alone, not held", len(g.Jobs), g.Held)
		}
		allHeld(t, claimAll(h.at(15*time.Second), false), 2, 10*time.Second) // both acme jobs: 2s to 12s
	})

	t.Run("AQueuePausedByARateLimitedAttempt", func(t *testing.T) {
		h := setup(t)
		h.ok(setLimits(fsm.DefaultQueue, store.QueueLimits{KeyConcurrency: 5}))
		h.submit(fsm.NewJob{Command: "a"}, fsm.NewJob{Command: "b"}, keyed("acme", 0))
		first := claim(h.at(time.Second))
		h.at(2 * time.Second).ok(rateLimited(first.Jobs[0], 10*time.Second)) // the queue paused from 2s to 12s
		fl := h.f.QueueLimits(fsm.DefaultQueue)
		if want := map[string]int{"paused": 3}; !maps.Equal(fl.Held, want) {
			t.Errorf("held %v while the queue is paused, want %v", fl.Held, want)
		}
		// The jobs were due from 0s, 1s ago... and held from 2s to 12s.
		allHeld(t, claimAll(h.at(20*time.Second), false), 3, 10*time.Second)
	})

	// Counted once: a key paused while its queue is at its concurrency
	// counts under concurrency, and the overlap of both holds once.
	t.Run("AKeyPausedInAQueueAtItsLimit", func(t *testing.T) {
		h := setup(t)
		h.ok(setLimits(fsm.DefaultQueue, store.QueueLimits{Concurrency: 2}))
		h.submit(keyed("acme", 0), keyed("other", 0), keyed("acme", 0))
		r := claimAll(h.at(time.Second), false) // acme and other run: the queue is full from 1s
		h.at(2 * time.Second).ok(rateLimited(r.Jobs[0], 10*time.Second))
		// acme paused 2s to 12s; the queue stays full with other running.
		if fl := h.f.QueueLimits(fsm.DefaultQueue); fl.Held["concurrency"] != 0 || fl.Held["key_paused"] != 2 {
			t.Errorf("held %v, want key_paused 2 (the queue has a free slot)", fl.Held)
		}
		h.at(3 * time.Second).submit(keyed("x", 0))
		x := claimAll(h, false)
		if len(x.Jobs) != 1 {
			t.Fatalf("claimed %d jobs at 3s, want x's (acme is paused)", len(x.Jobs))
		}
		// The queue is full again from 3s: acme's jobs count under it alone.
		if fl := h.f.QueueLimits(fsm.DefaultQueue); !maps.Equal(fl.Held, map[string]int{"concurrency": 2}) {
			t.Errorf("held %v with the queue full, want concurrency 2 alone", fl.Held)
		}
		if by, want := h.f.HeldBy(h.job(r.Jobs[0].ID), ns(h.now)), "queue default at its limit 2/2"; by != want {
			t.Errorf("acme's job held by %q, want %q (the first limit, as the counts say)", by, want)
		}
		h.at(4 * time.Second).ok(succeed(r.Jobs[1].ID, r.Jobs[1].Lease))
		h.ok(succeed(x.Jobs[0].ID, x.Jobs[0].Lease))
		got := claimAll(h.at(14*time.Second), false)
		if len(got.Jobs) != 2 {
			t.Fatalf("claimed %d jobs, want acme's 2", len(got.Jobs))
		}
		want := make(map[string]int64)
		for _, j := range got.Jobs {
			want[j.ID] = int64(11 * time.Second) // the queue 1s-2s and 3s-4s and the pause 2s-12s, once
			if j.ID == r.Jobs[0].ID {
				want[j.ID] = int64(10 * time.Second) // due again at 2s: the pause alone
			}
		}
		if !maps.Equal(got.Held, want) {
			t.Errorf("held %v, want %v", got.Held, want)
		}
	})

	// A fair claim takes keys in turns; waiting for a turn is not being
	// held by a limit, so a key's jobs count only the time its limit held
	// them.
	t.Run("KeysTakingTurns", func(t *testing.T) {
		h := setup(t)
		h.ok(setLimits(fsm.DefaultQueue, store.QueueLimits{KeyConcurrency: 1}))
		h.submit(keyed("a", 0), keyed("a", 0), keyed("b", 0), keyed("b", 0))
		r := claimAll(h.at(time.Second), true) // a and b, each at its limit from 1s
		if len(r.Jobs) != 2 {
			t.Fatalf("claimed %d jobs, want a's and b's first", len(r.Jobs))
		}
		h.at(5 * time.Second).ok(succeed(r.Jobs[0].ID, r.Jobs[0].Lease))
		h.at(6 * time.Second).ok(succeed(r.Jobs[1].ID, r.Jobs[1].Lease))
		one := func(d time.Duration) fsm.Result {
			return h.at(d).ok(claimCmd(fsm.Claim{WorkerID: "w", Max: 1, LeaseTTL: int64(time.Hour), Fair: true}))
		}
		next := one(7 * time.Second)
		held(t, next, 4*time.Second)
		after := one(8 * time.Second)
		held(t, after, 5*time.Second)
		if next.Jobs[0].ConcurrencyKey == after.Jobs[0].ConcurrencyKey {
			t.Errorf("claimed key %s twice in a row, want turns", next.Jobs[0].ConcurrencyKey)
		}
	})

	t.Run("NoneForAQueueWithoutLimits", func(t *testing.T) {
		h := setup(t)
		h.submit(keyed("acme", 0))
		if r := claim(h.at(time.Second)); len(r.Jobs) != 1 || r.Held != nil {
			t.Errorf("claimed %d jobs with held %v, want one and none", len(r.Jobs), r.Held)
		}
	})
}
