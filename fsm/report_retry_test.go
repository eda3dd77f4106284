package fsm_test

import (
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

func TestRepeatedReports(t *testing.T) {
	t.Run("RepeatedDoneForTheSameLeaseChangesNothing", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "true"})
		c := h.claimOne("w1")
		h.ok(succeed(c.ID, c.Lease))
		before := jobsJSON(t, h.f)
		r := h.ok(succeed(c.ID, c.Lease))
		if r.Jobs[0].Status != store.StatusDone {
			t.Fatalf("repeat got %s", r.Jobs[0].Status)
		}
		if after := jobsJSON(t, h.f); after != before {
			t.Fatalf("repeated report changed the job")
		}
	})

	t.Run("RepeatedFailForTheSameLeaseChangesNothing", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "false", MaxAttempts: 3})
		c := h.claimOne("w1")
		h.ok(fail(c.ID, c.Lease, "boom"))
		before := jobsJSON(t, h.f)
		h.ok(fail(c.ID, c.Lease, "boom"))
		if after := jobsJSON(t, h.f); after != before {
			t.Fatalf("repeated fail changed the job")
		}
		// A done for the lease that failed is a conflict, not a repeat.
		h.reject(succeed(c.ID, c.Lease), fsm.ErrStaleLease)
	})

	t.Run("ReportAfterTheReaperEndedTheAttemptIsStale", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "true", MaxAttempts: 1})
		c := h.claimOne("w1")
		h.at(time.Minute).ok(expire(c.ID, c.Lease))
		h.status(store.StatusFailed, c.ID)
		h.reject(fail(c.ID, c.Lease, "late"), fsm.ErrStaleLease)
		h.reject(succeed(c.ID, c.Lease), fsm.ErrStaleLease)
	})
}

func TestListedWorkerHeartbeat(t *testing.T) {
	t.Run("OnlyTheListedLeasesAreRenewed", func(t *testing.T) {
		h := setup(t)
		h.ok(register(store.Worker{ID: "w1"}))
		h.submit(fsm.NewJob{Command: "a"}, fsm.NewJob{Command: "b"})
		got := h.claim(fsm.Claim{WorkerID: "w1", Max: 2})
		if len(got) != 2 {
			t.Fatalf("claimed %d, want 2", len(got))
		}
		kept, lost := got[0], got[1]
		h.at(5 * time.Second)
		r := h.ok(fsm.Cmd{Op: fsm.OpWorkerHeartbeat, WorkerHeartbeat: &fsm.WorkerHeartbeat{
			WorkerID: "w1", LeaseTTL: int64(ttl), Listed: true,
			Leases: []fsm.LeaseRef{{JobID: kept.ID, Lease: kept.Lease}},
		}})
		if r.Renewed != 1 {
			t.Fatalf("renewed %d, want 1", r.Renewed)
		}
		if d := h.job(kept.ID).LeaseDeadline; d != ns(h.now.Add(ttl)) {
			t.Errorf("listed job deadline %d, want now+ttl", d)
		}
		if d := h.job(lost.ID).LeaseDeadline; d != lost.LeaseDeadline {
			t.Errorf("unlisted job deadline moved to %d", d)
		}
	})

	t.Run("AnUnlistedBodyRenewsEverything", func(t *testing.T) {
		h := setup(t)
		h.ok(register(store.Worker{ID: "w1"}))
		h.submit(fsm.NewJob{Command: "a"}, fsm.NewJob{Command: "b"})
		h.claim(fsm.Claim{WorkerID: "w1", Max: 2})
		if r := h.at(time.Second).ok(workerHeartbeat("w1", ttl)); r.Renewed != 2 {
			t.Fatalf("renewed %d, want 2", r.Renewed)
		}
	})
}

func TestLeasesNeverRepeat(t *testing.T) {
	t.Run("TheEntryAfterAMultiClaimGetsAFreshLease", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "a"}, fsm.NewJob{Command: "b"}, fsm.NewJob{Command: "c"})
		two := h.claim(fsm.Claim{WorkerID: "w1", Max: 2})
		third := h.claimOne("w2")
		seen := map[uint64]bool{}
		for _, j := range append(two, third) {
			if seen[j.Lease] {
				t.Fatalf("lease %d handed out twice", j.Lease)
			}
			seen[j.Lease] = true
		}
		if third.Lease <= two[1].Lease {
			t.Fatalf("lease %d after lease %d", third.Lease, two[1].Lease)
		}
	})
}
