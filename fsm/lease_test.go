package fsm_test

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

func TestFencing(t *testing.T) {
	t.Run("PresumedDeadWorkerCannotOverwriteItsReplacement", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x", MaxAttempts: 3, Backoff: store.Backoff{Base: int64(time.Second)}})
		a := h.claimOne("A")
		la := a.Lease

		// A goes quiet; the reaper expires its lease past the deadline.
		h.at(11 * time.Second)
		if got := h.f.Expired(ns(h.now), 10); len(got) != 1 || got[0].Lease != la {
			t.Fatalf("Expired = %+v, want A's lease %d", got, la)
		}
		r := h.ok(fsm.Cmd{Op: fsm.OpExpire, Expire: &fsm.Expire{JobID: a.ID, Lease: la}})
		j := h.job(a.ID)
		if j.Status != store.StatusPending || j.RunAt != ns(h.now.Add(time.Second)) || j.LeaseDeadline != 0 {
			t.Fatalf("after expire: %s run at %d deadline %d, want pending at now+1s with no deadline", j.Status, j.RunAt, j.LeaseDeadline)
		}
		wantHist := store.Attempt{Attempt: 1, WorkerID: "A", Lease: la, Status: store.StatusFailed,
			Error: "lease expired: worker A stopped heartbeating", Started: ns(t0), Ended: ns(h.now), Expired: true}
		if len(j.History) != 1 || !reflect.DeepEqual(j.History[0], wantHist) || j.LastError != wantHist.Error {
			t.Fatalf("history %+v last error %q, want [%+v]", j.History, j.LastError, wantHist)
		}
		if !reflect.DeepEqual(r.Jobs[0], j) {
			t.Errorf("expire result %+v, stored %+v", r.Jobs[0], j)
		}
		if got := h.f.Expired(ns(h.now), 10); len(got) != 0 {
			t.Fatalf("Expired after the expire = %+v, want none", got)
		}

		h.at(12 * time.Second)
		b := h.claimOne("B")
		lb := b.Lease
		if lb <= la || b.Attempts != 2 {
			t.Fatalf("B's claim: lease %d attempts %d, want a lease above %d and attempt 2", lb, b.Attempts, la)
		}

		// A wakes up and reports on its old lease: fenced off.
		h.at(13 * time.Second)
		h.reject(report(fsm.Report{JobID: a.ID, Lease: la, Success: true, Output: "from A"}), fsm.ErrStaleLease)
		h.reject(report(fsm.Report{JobID: a.ID, Lease: la, Error: "A failed"}), fsm.ErrStaleLease)
		h.reject(heartbeat(a.ID, la, ttl), fsm.ErrStaleLease)
		h.reject(expire(a.ID, la), fsm.ErrStaleLease)
		if j := h.job(a.ID); j.Status != store.StatusRunning || j.WorkerID != "B" || j.Lease != lb {
			t.Fatalf("after A's stale reports: %s worker %s lease %d, want running by B on %d", j.Status, j.WorkerID, j.Lease, lb)
		}

		h.ok(report(fsm.Report{JobID: b.ID, Lease: lb, Success: true, Output: "from B", ExitCode: intp(0)}))
		j = h.job(a.ID)
		if j.Status != store.StatusDone || j.Output != "from B" || j.DoneAt != ns(h.now) || j.LastError != "" || *j.ExitCode != 0 {
			t.Fatalf("after B's report: %+v, want done with B's output", j)
		}
		if len(j.History) != 2 || j.History[1].Status != store.StatusDone || j.History[1].Lease != lb || j.History[1].WorkerID != "B" {
			t.Fatalf("history = %+v, want B's attempt done", j.History)
		}
		// Neither a late A nor a repeated B changes the result.
		h.reject(succeed(a.ID, la), fsm.ErrStaleLease)
		h.reject(report(fsm.Report{JobID: b.ID, Lease: lb, Error: "again"}), fsm.ErrStaleLease)
	})

	t.Run("LeaseZeroMeansTheCurrentAttempt", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x"})
		j := h.claimOne("w")
		h.at(5 * time.Second)
		r := h.ok(heartbeat(j.ID, 0, ttl))
		if r.Deadline != ns(h.now.Add(ttl)) || r.Renewed != 1 {
			t.Fatalf("heartbeat result deadline %d renewed %d, want now+ttl and 1", r.Deadline, r.Renewed)
		}
		h.ok(succeed(j.ID, 0))
		h.status(store.StatusDone, j.ID)
	})

	t.Run("ReportOnAJobNotRunning", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x"})
		h.reject(succeed("job-1", 0), fsm.ErrNotRunning)
		h.reject(succeed("job-1", 7), fsm.ErrStaleLease)
		h.reject(heartbeat("job-1", 0, ttl), fsm.ErrNotRunning)
		h.reject(succeed("job-404", 0), fsm.ErrNotFound)
		h.reject(heartbeat("job-404", 0, ttl), fsm.ErrNotFound)
		h.reject(expire("job-404", 3), fsm.ErrNotFound)
	})
}

func TestExpire(t *testing.T) {
	t.Run("HeartbeatThatWonTheRaceKeepsTheJob", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x", MaxAttempts: 2})
		j := h.claimOne("w")
		h.at(8 * time.Second)
		r := h.ok(heartbeat(j.ID, j.Lease, ttl))
		if r.Deadline != ns(t0.Add(18*time.Second)) {
			t.Fatalf("renewed deadline %d, want t0+18s", r.Deadline)
		}
		// The reaper saw the old deadline (t0+10s) and proposed an expire.
		h.at(12 * time.Second)
		h.reject(expire(j.ID, j.Lease), fsm.ErrConflict)
		if got := h.job(j.ID); got.Status != store.StatusRunning || got.LeaseDeadline != ns(t0.Add(18*time.Second)) || got.Attempts != 1 {
			t.Fatalf("job after rejected expire: %s deadline %d attempts %d", got.Status, got.LeaseDeadline, got.Attempts)
		}
	})

	t.Run("ExpireBeforeTheDeadlineIsRejected", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x"})
		j := h.claimOne("w")
		h.at(ttl - time.Nanosecond)
		h.reject(expire(j.ID, j.Lease), fsm.ErrConflict)
	})

	t.Run("ExpireAtTheDeadlineEndsTheAttempt", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x"})
		j := h.claimOne("w")
		h.at(ttl)
		h.ok(expire(j.ID, j.Lease))
		got := h.job(j.ID)
		if got.Status != store.StatusFailed || got.LastError != "lease expired: worker w stopped heartbeating" || got.DoneAt != ns(h.now) {
			t.Fatalf("job = %s %q done %d, want failed for good (1 attempt) with the lease message", got.Status, got.LastError, got.DoneAt)
		}
	})

	t.Run("ExpireOfAFinishedAttemptIsStale", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x"})
		j := h.claimOne("w")
		h.ok(succeed(j.ID, j.Lease))
		h.at(time.Hour)
		h.reject(expire(j.ID, j.Lease), fsm.ErrStaleLease)
		h.reject(expire(j.ID, j.Lease+1), fsm.ErrStaleLease)
	})

	t.Run("ClockNeverRunsBackwards", func(t *testing.T) {
		// A new leader whose clock is behind cannot un-expire a lease: the
		// FSM's time is the latest entry time it has seen.
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x", MaxAttempts: 2})
		j := h.claimOne("w")
		h.at(time.Minute)
		h.ok(fsm.Cmd{Op: fsm.OpRegister, Register: &fsm.Register{Worker: store.Worker{ID: "other"}}})
		h.at(time.Second) // behind
		h.ok(expire(j.ID, j.Lease))
		if got := h.job(j.ID); got.History[0].Ended != ns(t0.Add(time.Minute)) {
			t.Fatalf("attempt ended at %d, want t0+1m (the latest time seen)", got.History[0].Ended)
		}
		h.submit(fsm.NewJob{Command: "y"})
		if got := h.job("job-2"); got.CreatedAt != ns(t0.Add(time.Minute)) {
			t.Fatalf("created at %d, want t0+1m", got.CreatedAt)
		}
	})
}

func TestHeartbeat(t *testing.T) {
	t.Run("WorkerHeartbeatFromAnUnknownWorker", func(t *testing.T) {
		h := setup(t)
		r := h.one(workerHeartbeat("ghost", ttl))
		if !errors.Is(r.Err, fsm.ErrWorkerNotFound) {
			t.Fatalf("err = %v, want ErrWorkerNotFound", r.Err)
		}
		if ws, _ := h.f.Workers(); len(ws) != 0 {
			t.Fatalf("workers = %+v, want none", ws)
		}
	})

	t.Run("WorkerHeartbeatRenewsEveryLeaseItHolds", func(t *testing.T) {
		h := setup(t)
		h.ok(register(store.Worker{ID: "w1", Slots: 2}))
		h.submit(fsm.NewJob{Command: "a"}, fsm.NewJob{Command: "b"}, fsm.NewJob{Command: "c"})
		h.claim(fsm.Claim{WorkerID: "w1", Max: 2})
		h.claim(fsm.Claim{WorkerID: "w2"}) // registers w2 implicitly
		h.at(5 * time.Second)
		r := h.ok(workerHeartbeat("w1", ttl))
		if r.Renewed != 2 || r.Deadline != ns(h.now.Add(ttl)) || len(r.Actions) != 0 {
			t.Fatalf("result renewed %d deadline %d actions %v, want 2, now+ttl, none", r.Renewed, r.Deadline, r.Actions)
		}
		if r.Worker == nil || r.Worker.ID != "w1" || r.Worker.LastHeartbeat != ns(h.now) || r.Worker.Slots != 2 {
			t.Fatalf("result worker = %+v", r.Worker)
		}
		for _, id := range []string{"job-1", "job-2"} {
			if got := h.job(id).LeaseDeadline; got != ns(h.now.Add(ttl)) {
				t.Errorf("%s deadline %d, want now+ttl", id, got)
			}
		}
		if got := h.job("job-3").LeaseDeadline; got != ns(t0.Add(ttl)) {
			t.Errorf("w2's job-3 deadline %d, want unchanged t0+ttl", got)
		}
		// A worker that only claimed heartbeats too.
		if r := h.ok(workerHeartbeat("w2", ttl)); r.Renewed != 1 {
			t.Fatalf("w2 renewed %d, want 1", r.Renewed)
		}
		// After its jobs end, a heartbeat renews nothing.
		h.ok(succeed("job-1", 0))
		h.ok(fail("job-2", 0, "x"))
		if r := h.ok(workerHeartbeat("w1", ttl)); r.Renewed != 0 {
			t.Fatalf("w1 renewed %d after its jobs ended, want 0", r.Renewed)
		}
	})

	t.Run("RegisterKeepsTheFirstRegistrationTime", func(t *testing.T) {
		h := setup(t)
		h.ok(register(store.Worker{ID: "w2", Queues: []string{"a"}}))
		h.at(time.Minute)
		r := h.ok(register(store.Worker{ID: "w2", Queues: []string{"b"}, Slots: 4, RegisteredAt: 12345}))
		want := store.Worker{ID: "w2", Queues: []string{"b"}, Slots: 4, RegisteredAt: ns(t0), LastHeartbeat: ns(h.now), ModifyIndex: h.index}
		if !reflect.DeepEqual(*r.Worker, want) {
			t.Fatalf("result worker %+v, want %+v", *r.Worker, want)
		}
		h.ok(register(store.Worker{ID: "w1"}))
		ws, err := h.f.Workers()
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) != 2 || ws[0].ID != "w1" || !reflect.DeepEqual(*ws[1], want) {
			t.Fatalf("workers = %+v, want w1 then %+v", ws, want)
		}
	})

	t.Run("RegisterWithoutAnIDIsInvalid", func(t *testing.T) {
		h := setup(t)
		r := h.one(register(store.Worker{Slots: 1}))
		var ve *fsm.ValidationError
		if !errors.As(r.Err, &ve) || ve.Field != "id" {
			t.Fatalf("err = %v, want an id ValidationError", r.Err)
		}
	})
}

func TestTimeout(t *testing.T) {
	margin := fsm.TimeoutMargin
	t.Run("LeaseIsCappedAtTimeoutPlusMargin", func(t *testing.T) {
		h := setup(t)
		h.ok(register(store.Worker{ID: "w"}))
		h.submit(fsm.NewJob{Command: "sleep 999", Timeout: int64(30 * time.Second)})
		limit := ns(t0.Add(30*time.Second + margin))
		j := h.claim(fsm.Claim{WorkerID: "w", LeaseTTL: int64(time.Minute)})[0]
		if j.LeaseDeadline != limit {
			t.Fatalf("claim deadline = t0+%v, want t0+35s", time.Duration(j.LeaseDeadline-ns(t0)))
		}
		h.at(20 * time.Second)
		if r := h.ok(heartbeat(j.ID, j.Lease, time.Minute)); r.Deadline != limit {
			t.Fatalf("heartbeat deadline = t0+%v, want t0+35s", time.Duration(r.Deadline-ns(t0)))
		}
		h.at(25 * time.Second)
		h.ok(workerHeartbeat("w", time.Minute))
		if got := h.job(j.ID).LeaseDeadline; got != limit {
			t.Fatalf("worker heartbeat deadline = t0+%v, want t0+35s", time.Duration(got-ns(t0)))
		}
		h.at(30*time.Second + margin - time.Nanosecond)
		h.reject(expire(j.ID, j.Lease), fsm.ErrConflict)
		h.at(30*time.Second + margin)
		h.ok(expire(j.ID, j.Lease))
		got := h.job(j.ID)
		if got.Status != store.StatusFailed || got.LastError != "timed out after 30s" {
			t.Fatalf("job = %s %q, want failed, timed out after 30s", got.Status, got.LastError)
		}
	})

	t.Run("ShortLeaseExpiresBeforeTheTimeout", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x", Timeout: int64(time.Hour)})
		j := h.claimOne("w")
		if j.LeaseDeadline != ns(t0.Add(ttl)) {
			t.Fatalf("deadline = %d, want now+ttl below the timeout", j.LeaseDeadline)
		}
		h.at(ttl)
		h.ok(expire(j.ID, j.Lease))
		if got := h.job(j.ID).LastError; got != "lease expired: worker w stopped heartbeating" {
			t.Fatalf("last error = %q, want the lease message", got)
		}
	})

	t.Run("EachAttemptGetsItsOwnTimeout", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x", Timeout: int64(20 * time.Second), MaxAttempts: 2})
		j := h.claim(fsm.Claim{WorkerID: "w", LeaseTTL: int64(time.Hour)})[0]
		h.at(25 * time.Second)
		h.ok(expire(j.ID, j.Lease))
		h.at(100 * time.Second)
		j = h.claim(fsm.Claim{WorkerID: "w", LeaseTTL: int64(time.Hour)})[0]
		if want := ns(h.now.Add(20*time.Second + margin)); j.LeaseDeadline != want {
			t.Fatalf("second attempt deadline = %d, want its start + 25s", j.LeaseDeadline)
		}
	})
}

func TestCancelAction(t *testing.T) {
	t.Run("HeartbeatsTellTheWorkerToCancel", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "a"}, fsm.NewJob{Command: "b"})
		jobs := h.claim(fsm.Claim{WorkerID: "w", Max: 2})
		h.ok(cancel("job-2", false))
		want := []fsm.Action{{JobID: "job-2", Lease: jobs[1].Lease, Action: "cancel"}}
		if r := h.ok(heartbeat("job-2", jobs[1].Lease, ttl)); !slices.Equal(r.Actions, want) {
			t.Fatalf("job heartbeat actions = %+v, want %+v", r.Actions, want)
		}
		if r := h.ok(heartbeat("job-1", jobs[0].Lease, ttl)); len(r.Actions) != 0 {
			t.Fatalf("heartbeat of a job not cancelled has actions %+v", r.Actions)
		}
		if r := h.ok(workerHeartbeat("w", ttl)); !slices.Equal(r.Actions, want) || r.Renewed != 2 {
			t.Fatalf("worker heartbeat actions %+v renewed %d, want %+v and 2", r.Actions, r.Renewed, want)
		}
	})
}
