package fsm_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

func deleteCmd(ids ...string) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpDelete, Delete: &fsm.Delete{IDs: ids}}
}

func TestRetention(t *testing.T) {
	t.Run("FinishedJobExpiresAfterItsRetention", func(t *testing.T) {
		h := setup(t)
		j := h.submit(fsm.NewJob{Command: "true", MaxAttempts: 1, Retention: int64(time.Hour)})[0]
		c := h.claimOne("w1")
		h.at(time.Minute).ok(succeed(c.ID, c.Lease))
		if got, want := h.job(j.ID).ExpireAt, t0.Add(time.Minute+time.Hour).UnixNano(); got != want {
			t.Fatalf("expire_at %d, want %d", got, want)
		}
		if ids := h.f.ExpiredJobs(t0.Add(time.Hour).UnixNano(), 10); len(ids) != 0 {
			t.Fatalf("expired before its time: %v", ids)
		}
		// A delete proposed early (a leader with a fast clock) is a no-op.
		if r := h.at(time.Hour).ok(deleteCmd(j.ID)); r.Deleted != 0 {
			t.Fatalf("early delete removed %d jobs", r.Deleted)
		}
		at := t0.Add(2 * time.Hour)
		if ids := h.f.ExpiredJobs(at.UnixNano(), 10); len(ids) != 1 || ids[0] != j.ID {
			t.Fatalf("expired %v, want [%s]", ids, j.ID)
		}
		if r := h.at(2 * time.Hour).ok(deleteCmd(j.ID)); r.Deleted != 1 {
			t.Fatalf("deleted %d, want 1", r.Deleted)
		}
		if _, err := h.f.Job(j.ID); err == nil {
			t.Fatalf("job %s still there after delete", j.ID)
		}
	})

	t.Run("UnfinishedAndRetriedJobsNeverExpire", func(t *testing.T) {
		h := setup(t)
		js := h.submit(
			fsm.NewJob{Command: "a", MaxAttempts: 1, Retention: int64(time.Second)},
			fsm.NewJob{Command: "b", MaxAttempts: 1, Retention: int64(time.Second)},
		)
		c := h.claimOne("w1")
		h.ok(fail(c.ID, c.Lease, "boom"))
		h.status(store.StatusFailed, c.ID)
		h.ok(retry(c.ID))
		if got := h.job(c.ID).ExpireAt; got != 0 {
			t.Fatalf("retried job keeps expire_at %d", got)
		}
		h.at(time.Hour).ok(deleteCmd(js[0].ID, js[1].ID))
		h.status(store.StatusPending, js[0].ID, js[1].ID)
	})

	t.Run("DeletedDependencyCountsAsMet", func(t *testing.T) {
		// job-1 fails and takes job-3 with it; job-2 is done. Both parents
		// expire long before job-3, which keeps its depends_on as it was.
		h := setup(t)
		h.submit(
			fsm.NewJob{Command: "a", MaxAttempts: 1, Retention: int64(time.Second)},
			fsm.NewJob{Command: "b", MaxAttempts: 1, Retention: int64(time.Second)},
			fsm.NewJob{Command: "c", DependsOn: []string{"$0", "$1"}},
		)
		c := h.claimOne("w1")
		h.ok(fail(c.ID, c.Lease, "boom"))
		c = h.claimOne("w1")
		h.ok(succeed(c.ID, c.Lease))
		h.status(store.StatusFailed, "job-1", "job-3")
		if r := h.at(time.Minute).ok(deleteCmd("job-1", "job-2")); r.Deleted != 2 {
			t.Fatalf("deleted %d, want both parents", r.Deleted)
		}
		// Nothing is left to wait for: a retry runs it.
		h.ok(retry("job-3"))
		if j := h.job("job-3"); j.Status != store.StatusPending || j.Waiting != 0 || len(j.DependsOn) != 2 {
			t.Fatalf("retried job-3 = %s waiting %d on %v, want pending, 0, both ids kept", j.Status, j.Waiting, j.DependsOn)
		}
		// A new job may not name a deleted one.
		r := h.one(submit(fsm.NewJob{Command: "d", DependsOn: []string{"job-2"}}))
		if ve := (*fsm.ValidationError)(nil); !errors.As(r.Err, &ve) || ve.Field != "depends_on" {
			t.Fatalf("submit depending on a deleted job: err %v, want a depends_on ValidationError", r.Err)
		}
	})

	t.Run("DeletingAJobDropsItsEdgesBothWays", func(t *testing.T) {
		h := setup(t)
		// job-1 <- job-2 <- job-3, and job-1 <- job-4; job-2 has a retention.
		h.submit(
			fsm.NewJob{Command: "a"},
			fsm.NewJob{Command: "b", MaxAttempts: 1, Retention: int64(time.Second), DependsOn: []string{"$0"}},
			fsm.NewJob{Command: "c", DependsOn: []string{"$1"}},
			fsm.NewJob{Command: "d", DependsOn: []string{"$0"}},
		)
		h.ok(cancel("job-2", false))
		h.at(time.Hour).ok(deleteCmd("job-2"))
		if got := h.dependents("job-1"); !slices.Equal(got, []string{"job-4"}) || h.dependentCount("job-1") != 1 {
			t.Fatalf("job-1 dependents %v (count %d) after job-2's deletion, want [job-4]", got, h.dependentCount("job-1"))
		}
		// The store's check at cleanup finds no edge to or from job-2.
	})

	t.Run("ZeroRetentionKeepsForever", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "true", MaxAttempts: 1})
		c := h.claimOne("w1")
		h.ok(succeed(c.ID, c.Lease))
		if got := h.job(c.ID).ExpireAt; got != 0 {
			t.Fatalf("expire_at %d, want 0", got)
		}
	})
}

func TestIdempotencyKeys(t *testing.T) {
	t.Run("KeyIsFreedWhenItsJobIsDeleted", func(t *testing.T) {
		h := setup(t)
		j := h.submit(fsm.NewJob{Command: "true", MaxAttempts: 1, IdempotencyKey: "k", Retention: int64(time.Second)})[0]
		c := h.claimOne("w1")
		h.ok(succeed(c.ID, c.Lease))
		h.at(time.Minute).ok(deleteCmd(j.ID))
		r := h.ok(submit(fsm.NewJob{Command: "true", IdempotencyKey: "k"}))
		if r.Existing || r.Jobs[0].ID == j.ID {
			t.Fatalf("resubmit after delete returned the old job %+v", r.Jobs[0])
		}
	})

	t.Run("UniqueForHoldsTheKeyAfterDeletion", func(t *testing.T) {
		h := setup(t)
		j := h.submit(fsm.NewJob{Command: "true", MaxAttempts: 1, IdempotencyKey: "k",
			Retention: int64(time.Second), UniqueFor: int64(time.Hour)})[0]
		c := h.claimOne("w1")
		h.ok(succeed(c.ID, c.Lease))
		h.at(time.Minute).ok(deleteCmd(j.ID))
		h.at(2*time.Minute).reject(submit(fsm.NewJob{Command: "true", IdempotencyKey: "k"}), fsm.ErrConflict)
		// After unique_for the key is free again.
		r := h.at(2 * time.Hour).ok(submit(fsm.NewJob{Command: "true", IdempotencyKey: "k"}))
		if r.Existing {
			t.Fatalf("submit after unique_for matched the old key")
		}
	})

	t.Run("UniqueForEndsEvenWhileTheJobIsRetained", func(t *testing.T) {
		h := setup(t)
		j := h.submit(fsm.NewJob{Command: "true", IdempotencyKey: "k", UniqueFor: int64(time.Minute)})[0]
		if r := h.at(30 * time.Second).ok(submit(fsm.NewJob{Command: "true", IdempotencyKey: "k"})); !r.Existing || r.Jobs[0].ID != j.ID {
			t.Fatalf("within unique_for: got %+v, want the existing job", r)
		}
		r := h.at(2 * time.Minute).ok(submit(fsm.NewJob{Command: "true", IdempotencyKey: "k"}))
		if r.Existing || r.Jobs[0].ID == j.ID {
			t.Fatalf("after unique_for: got the old job")
		}
	})
}
