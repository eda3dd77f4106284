package fsm_test

import (
	"errors"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

func forget(worker string, seenAt int64) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpForgetWorker, ForgetWorker: &fsm.ForgetWorker{WorkerID: worker, SeenAt: seenAt}}
}

func (h *harness) worker(id string) (*store.Worker, error) {
	h.t.Helper()
	workers, err := h.f.Workers()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, w := range workers {
		if w.ID == id {
			return w, nil
		}
	}
	return nil, store.ErrNotFound
}

func TestForgetWorker(t *testing.T) {
	t.Run("AnIdleWorkerIsForgotten", func(t *testing.T) {
		h := setupGangs(t)
		h.gpu("w1", 8000, "gpu")
		w, _ := h.worker("w1")
		h.at(time.Hour).ok(forget("w1", w.LastHeartbeat))
		if _, err := h.worker("w1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("w1 is still listed: %v", err)
		}
		checkIndexes(t, h.f)
		// A gang that would only fit the forgotten worker is not placed on it.
		id, _ := h.gang(1, gpuJob)
		h.reject(reserveGang(id, h.gangOf(id).Epoch, "w1"), nil)
		// It comes back as a new worker.
		h.gpu("w1", 8000, "gpu")
		if w2, err := h.worker("w1"); err != nil || w2.RegisteredAt == w.RegisteredAt {
			t.Errorf("back: %+v %v", w2, err)
		}
	})
	t.Run("AWorkerHeardFromSinceIsKept", func(t *testing.T) {
		h := setup(t)
		h.ok(register(store.Worker{ID: "w1"}))
		w, _ := h.worker("w1")
		h.at(time.Minute).ok(register(store.Worker{ID: "w1"}))
		h.at(time.Hour).reject(forget("w1", w.LastHeartbeat), fsm.ErrConflict)
		if _, err := h.worker("w1"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("AWorkerHoldingALeaseIsKept", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x"})
		j := h.claimOne("w1")
		w, _ := h.worker("w1")
		h.at(time.Hour).reject(forget("w1", w.LastHeartbeat), fsm.ErrConflict)
		h.status(store.StatusRunning, j.ID)
	})
	t.Run("AWorkerHoldingAReservationIsKept", func(t *testing.T) {
		h := setupGangs(t)
		h.gpu("w1", 8000, "gpu")
		id, _ := h.gang(1, gpuJob)
		h.ok(reserveGang(id, h.gangOf(id).Epoch, "w1"))
		w, _ := h.worker("w1")
		h.reject(forget("w1", w.LastHeartbeat), fsm.ErrConflict)
	})
	t.Run("AnUnknownWorker", func(t *testing.T) {
		h := setup(t)
		h.reject(forget("nobody", 0), fsm.ErrWorkerNotFound)
	})
	t.Run("TheSameOnEveryNode", func(t *testing.T) {
		h := setup(t)
		h.ok(register(store.Worker{ID: "w1", Tags: []string{"a"}}))
		w, _ := h.worker("w1")
		h.ok(forget("w1", w.LastHeartbeat))
		if got, want := digest(t, snapshotRestore(t, h.f)), digest(t, h.f); got != want {
			t.Errorf("restored digest %s, want %s", got, want)
		}
	})
}
