package fsm_test

import (
	"maps"
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
