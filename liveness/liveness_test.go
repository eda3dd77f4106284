package liveness

import (
	"errors"
	"testing"
	"time"

	"github.com/workron/workron/store"
)

func TestTracker(t *testing.T) {
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	setup := func(t *testing.T) *Tracker {
		t.Helper()
		tr, err := New(Config{OfflineAfter: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}

	t.Run("LastSeenIsTheLaterOfTheHeartbeatAndTheMark", func(t *testing.T) {
		tr := setup(t)
		w := &store.Worker{ID: "w", LastHeartbeat: start.UnixNano()}
		if got := tr.LastSeen(w); !got.Equal(start) {
			t.Fatalf("unmarked: last seen %s, want the stored heartbeat %s", got, start)
		}
		tr.Heard("w", start.Add(-time.Second))
		if got := tr.LastSeen(w); !got.Equal(start) {
			t.Fatalf("an older mark: last seen %s, want %s", got, start)
		}
		tr.Heard("w", start.Add(time.Second))
		if got := tr.LastSeen(w); !got.Equal(start.Add(time.Second)) {
			t.Fatalf("a later mark: last seen %s, want %s", got, start.Add(time.Second))
		}
		tr.Forget("w")
		if got := tr.LastSeen(w); !got.Equal(start) {
			t.Fatalf("forgotten: last seen %s, want %s", got, start)
		}
	})

	t.Run("ActiveUntilSilentForOfflineAfter", func(t *testing.T) {
		tr := setup(t)
		w := &store.Worker{ID: "w", LastHeartbeat: start.UnixNano()}
		if !tr.Active(w, start.Add(time.Minute)) {
			t.Fatal("silent for exactly OfflineAfter: not active")
		}
		if tr.Active(w, start.Add(time.Minute+time.Nanosecond)) {
			t.Fatal("silent past OfflineAfter: still active")
		}
		tr.Heard("w", start.Add(time.Minute))
		if !tr.Active(w, start.Add(time.Minute+time.Second)) {
			t.Fatal("a long-poll heard here did not keep it active")
		}
	})

	t.Run("DeclaredOfflineIsInactiveUntilHeardFromAgain", func(t *testing.T) {
		tr := setup(t)
		w := &store.Worker{ID: "w", LastHeartbeat: start.UnixNano(), OfflineAt: start.UnixNano()}
		if tr.Active(w, start) {
			t.Fatal("declared offline at its last heartbeat: still active")
		}
		tr.Heard("w", start.Add(time.Second))
		if !tr.Active(w, start.Add(time.Second)) {
			t.Fatal("heard from after it was declared offline: not active")
		}
	})

	t.Run("OfflineAfterMustBePositive", func(t *testing.T) {
		for _, d := range []time.Duration{0, -time.Second} {
			if _, err := New(Config{OfflineAfter: d}); !errors.Is(err, ErrOfflineAfter) {
				t.Fatalf("OfflineAfter %s: err %v, want ErrOfflineAfter", d, err)
			}
		}
	})
}
