package fsm_test

import (
	"bytes"
	"io"
	"slices"
	"testing"

	"github.com/workron/workron/fsm"
)

func TestWatchStops(t *testing.T) {
	t.Run("ACancelWakesOnlyItsWorkersWatch", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "a"}, fsm.NewJob{Command: "b"})
		a, b := h.claimOne("w1"), h.claimOne("w2")
		w1, done1 := h.f.WatchStops("w1")
		defer done1()
		w2, done2 := h.f.WatchStops("w2")
		defer done2()
		if acts, err := h.f.StopActions("w1", nil); err != nil || len(acts) != 0 {
			t.Fatalf("before the cancel: actions %+v, %v; want none", acts, err)
		}
		h.ok(workerHeartbeat("w1", ttl))
		if closed(w1) {
			t.Fatal("a heartbeat woke the watch")
		}
		h.ok(cancel(a.ID, false))
		if !closed(w1) || closed(w2) {
			t.Fatalf("after cancelling w1's job: w1's watch woken %v, w2's %v; want only w1's", closed(w1), closed(w2))
		}
		want := []fsm.Action{{JobID: a.ID, Lease: a.Lease, Action: "cancel"}}
		if acts, err := h.f.StopActions("w1", nil); err != nil || !slices.Equal(acts, want) {
			t.Fatalf("actions %+v, %v; want %+v", acts, err, want)
		}
		if acts, _ := h.f.StopActions("w1", map[string]uint64{a.ID: a.Lease}); len(acts) != 0 {
			t.Fatalf("actions of a known attempt: %+v, want none", acts)
		}
		if acts, _ := h.f.StopActions("w2", nil); len(acts) != 0 {
			t.Fatalf("w2's actions %+v, want none (job %s runs on)", acts, b.ID)
		}
	})

	t.Run("AStopNobodyWatchesLeavesNothingBehind", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "a"})
		a := h.claimOne("w1")
		_, done := h.f.WatchStops("w1")
		done()
		done() // twice is once
		h.ok(cancel(a.ID, false))
		w1, done := h.f.WatchStops("w1")
		defer done()
		if closed(w1) {
			t.Fatal("a watch begun after the cancel is already woken")
		}
		if acts, _ := h.f.StopActions("w1", nil); len(acts) != 1 {
			t.Fatalf("actions %+v, want the cancel", acts)
		}
	})

	t.Run("ARestoreWakesEveryWatch", func(t *testing.T) {
		h := setup(t)
		w1, done := h.f.WatchStops("w1")
		defer done()
		if err := h.f.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, h.f)))); err != nil {
			t.Fatal(err)
		}
		if !closed(w1) {
			t.Fatal("a restore left the watch asleep")
		}
	})
}
