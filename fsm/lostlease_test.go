package fsm_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

func TestWorkerHeartbeatNamesTheLeasesItDidNotRenew(t *testing.T) {
	t.Run("ReapedMovedOnAndUnknown", func(t *testing.T) {
		h := setup(t)
		h.ok(register(store.Worker{ID: "w1", Slots: 3}))
		h.submit(fsm.NewJob{Command: "live"}, fsm.NewJob{Command: "reaped"}, fsm.NewJob{Command: "moved", MaxAttempts: 2})
		jobs := h.claim(fsm.Claim{WorkerID: "w1", Max: 3})
		if len(jobs) != 3 {
			t.Fatalf("w1 claimed %d jobs, want 3", len(jobs))
		}
		live, reaped, moved := jobs[0], jobs[1], jobs[2]
		h.at(ttl / 2)
		h.ok(heartbeat(live.ID, live.Lease, ttl)) // only live is renewed in time
		h.at(ttl)
		h.ok(expire(reaped.ID, reaped.Lease)) // its one attempt: failed for good
		h.ok(expire(moved.ID, moved.Lease))   // pending again...
		again := h.claimOne("w2")             // ...and another attempt runs on w2
		if again.ID != moved.ID || again.Lease == moved.Lease {
			t.Fatalf("w2 claimed %s lease %d, want %s under a new lease", again.ID, again.Lease, moved.ID)
		}

		r := h.ok(listedHeartbeat("w1",
			fsm.LeaseRef{JobID: live.ID, Lease: live.Lease},
			fsm.LeaseRef{JobID: reaped.ID, Lease: reaped.Lease},
			fsm.LeaseRef{JobID: moved.ID, Lease: moved.Lease},
			fsm.LeaseRef{JobID: "job-none", Lease: 7},
		))
		want := []fsm.LostLease{
			{JobID: reaped.ID, Lease: reaped.Lease, Reason: fsm.ErrNotRunning},
			{JobID: moved.ID, Lease: moved.Lease, Reason: fsm.ErrStaleLease},
			{JobID: "job-none", Lease: 7, Reason: fsm.ErrNotFound},
		}
		if r.Renewed != 1 || !reflect.DeepEqual(r.Lost, want) {
			t.Fatalf("renewed %d lost %+v, want 1 and %+v", r.Renewed, r.Lost, want)
		}
		if got := h.job(live.ID).LeaseDeadline; got != ns(h.now.Add(ttl)) {
			t.Errorf("live job's deadline %d, want now+ttl", got)
		}
		if got := h.job(moved.ID); got.WorkerID != "w2" || got.LeaseDeadline != again.LeaseDeadline {
			t.Errorf("w2's attempt: worker %s deadline %d, want w2's unchanged %d", got.WorkerID, got.LeaseDeadline, again.LeaseDeadline)
		}
		h.status(store.StatusFailed, reaped.ID)
	})

	t.Run("AllRenewedOrNoneListedNamesNone", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "a"})
		j := h.claimOne("w")
		if r := h.ok(listedHeartbeat("w", fsm.LeaseRef{JobID: j.ID, Lease: j.Lease})); r.Renewed != 1 || r.Lost != nil {
			t.Fatalf("renewed %d lost %+v, want 1 and none", r.Renewed, r.Lost)
		}
		h.ok(succeed(j.ID, j.Lease))
		// A v0 heartbeat lists nothing, so names nothing.
		if r := h.ok(workerHeartbeat("w", ttl)); r.Renewed != 0 || r.Lost != nil {
			t.Fatalf("v0 heartbeat: renewed %d lost %+v, want 0 and none", r.Renewed, r.Lost)
		}
	})

	t.Run("AnOlderLeaseListedBesideTheCurrentOne", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "a", MaxAttempts: 2})
		old := h.claimOne("w")
		h.at(ttl)
		h.ok(expire(old.ID, old.Lease))
		cur := h.claimOne("w")
		r := h.ok(listedHeartbeat("w", fsm.LeaseRef{JobID: old.ID, Lease: old.Lease}, fsm.LeaseRef{JobID: cur.ID, Lease: cur.Lease}))
		want := []fsm.LostLease{{JobID: old.ID, Lease: old.Lease, Reason: fsm.ErrStaleLease}}
		if r.Renewed != 1 || !reflect.DeepEqual(r.Lost, want) {
			t.Fatalf("renewed %d lost %+v, want 1 and %+v", r.Renewed, r.Lost, want)
		}
	})

	t.Run("TheListIsBoundedByWhatItLists", func(t *testing.T) {
		h := setup(t)
		h.ok(register(store.Worker{ID: "w"}))
		leases := make([]fsm.LeaseRef, 50)
		for i := range leases {
			leases[i] = fsm.LeaseRef{JobID: "job-gone", Lease: uint64(i + 1)}
		}
		h.at(time.Second)
		if r := h.ok(listedHeartbeat("w", leases...)); len(r.Lost) != len(leases) {
			t.Fatalf("lost %d, want one per listed lease (%d)", len(r.Lost), len(leases))
		}
	})
}
