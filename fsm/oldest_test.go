package fsm_test

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
)

func TestOldestReady(t *testing.T) {
	h := setup(t)
	oldest := func(at time.Duration) map[string]int64 { return h.f.OldestReady(ns(t0.Add(at))) }
	want := func(at time.Duration, w map[string]int64) {
		t.Helper()
		if got := oldest(at); !maps.Equal(got, w) {
			t.Fatalf("OldestReady at +%s = %v, want %v", at, got, w)
		}
	}

	t.Run("EmptyWithoutPendingJobs", func(t *testing.T) {
		want(0, map[string]int64{})
	})

	// default: a low-priority job first, a high-priority job later, a typed
	// job in between; q2: one job, delayed by a minute.
	h.at(0).submit(fsm.NewJob{Command: "low", Priority: -5})
	h.at(time.Second).submit(fsm.NewJob{Type: "email"})
	h.at(2 * time.Second).submit(fsm.NewJob{Command: "high", Priority: 9})
	h.at(3 * time.Second).submit(fsm.NewJob{Command: "later", Queue: "q2", RunAt: ns(t0.Add(time.Minute))})

	t.Run("TheEarliestAcrossPrioritiesAndTypes", func(t *testing.T) {
		want(3*time.Second, map[string]int64{"default": ns(t0)})
	})

	t.Run("ADelayedJobCountsOnceDue", func(t *testing.T) {
		want(time.Minute, map[string]int64{"default": ns(t0), "q2": ns(t0.Add(time.Minute))})
	})

	t.Run("AClaimedJobNoLongerCounts", func(t *testing.T) {
		h.at(4 * time.Second)
		// The claim takes the high-priority job first, then the low one.
		h.claim(fsm.Claim{WorkerID: "w", Max: 2})
		want(4*time.Second, map[string]int64{"default": ns(t0.Add(time.Second))}) // the typed job
	})
}

func TestAnyQueues(t *testing.T) {
	h := setup(t)
	// Queues c, b, a get a job in that order; d is paused; e's job is not
	// due yet.
	h.at(0).submit(fsm.NewJob{Command: "x", Queue: "c"})
	h.at(time.Second).submit(fsm.NewJob{Command: "x", Queue: "b"})
	h.at(2*time.Second).submit(fsm.NewJob{Command: "x", Queue: "a"}, fsm.NewJob{Command: "x", Queue: "d"},
		fsm.NewJob{Command: "x", Queue: "e", RunAt: ns(t0.Add(time.Hour))})
	h.ok(pause("d", true))
	now := ns(t0.Add(time.Minute))

	t.Run("DefaultThenTheLongestWaitingUnpausedQueues", func(t *testing.T) {
		if got, want := h.f.AnyQueues(now, 10), []string{"default", "c", "b", "a"}; !slices.Equal(got, want) {
			t.Fatalf("AnyQueues = %v, want %v", got, want)
		}
	})
	t.Run("AtMostTheLimit", func(t *testing.T) {
		if got, want := h.f.AnyQueues(now, 3), []string{"default", "c", "b"}; !slices.Equal(got, want) {
			t.Fatalf("AnyQueues = %v, want %v", got, want)
		}
	})
	t.Run("ADelayedJobsQueueOnceDue", func(t *testing.T) {
		if got := h.f.AnyQueues(ns(t0.Add(2*time.Hour)), 10); !slices.Contains(got, "e") {
			t.Fatalf("AnyQueues = %v, want e in it", got)
		}
	})
}
