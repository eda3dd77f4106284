package fsm_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

func perSecond(n int64) store.Rate { return store.Rate{Count: n, Per: int64(time.Second)} }

func keyed(key string, prio int) fsm.NewJob {
	return fsm.NewJob{Command: "x", ConcurrencyKey: key, Priority: prio}
}

// claimN has worker claim up to n jobs and returns their ids.
func (h *harness) claimN(worker string, n int) []string {
	h.t.Helper()
	return jobIDs(h.claim(fsm.Claim{WorkerID: worker, Max: n}))
}

func TestFlow(t *testing.T) {
	t.Run("QueueConcurrencyHoldsClaimsUntilAnAttemptEnds", func(t *testing.T) {
		h := setup(t)
		h.ok(setLimits(fsm.DefaultQueue, store.QueueLimits{Concurrency: 2}))
		jobs := h.submit(fsm.NewJob{Command: "a"}, fsm.NewJob{Command: "b"}, fsm.NewJob{Command: "c"})
		if got := h.claimN("w", 10); len(got) != 2 {
			t.Fatalf("claimed %v, want 2 jobs", got)
		}
		if got := h.claimN("w2", 10); len(got) != 0 {
			t.Fatalf("claimed %v at the limit, want none", got)
		}
		if !strings.Contains(h.f.HeldBy(h.job(jobs[2].ID), ns(h.now)), "queue default at its limit 2/2") {
			t.Errorf("held by %q", h.f.HeldBy(h.job(jobs[2].ID), ns(h.now)))
		}
		if fl := h.f.QueueLimits(fsm.DefaultQueue); fl.Running != 2 || fl.Held["concurrency"] != 1 {
			t.Errorf("flow %+v, want 2 running and 1 held by concurrency", fl)
		}
		j := h.job(jobs[0].ID)
		h.ok(succeed(j.ID, j.Lease))
		if got := h.claimN("w2", 10); len(got) != 1 || got[0] != jobs[2].ID {
			t.Fatalf("claimed %v after a report, want [%s]", got, jobs[2].ID)
		}
	})

	t.Run("KeyAtItsLimitIsPassedOverWhole", func(t *testing.T) {
		h := setup(t)
		h.ok(setLimits(fsm.DefaultQueue, store.QueueLimits{KeyConcurrency: 1}))
		// acme's jobs come first by priority, but only one may run.
		jobs := h.submit(keyed("acme", 9), keyed("acme", 9), keyed("acme", 9), keyed("beta", 1), fsm.NewJob{Command: "plain"})
		got := h.claimN("w", 10)
		want := []string{jobs[0].ID, jobs[3].ID, jobs[4].ID}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("claimed %v, want %v", got, want)
		}
		if by := h.f.HeldBy(h.job(jobs[1].ID), ns(h.now)); by != "key acme at its limit 1/1" {
			t.Errorf("held by %q", by)
		}
		if fl := h.f.QueueLimits(fsm.DefaultQueue); fl.KeysFull != 2 || fl.Held["key_concurrency"] != 2 {
			t.Errorf("flow %+v, want 2 keys full and 2 jobs held", fl)
		}
		j := h.job(jobs[0].ID)
		h.now = time.Unix(0, j.LeaseDeadline)
		h.ok(expire(j.ID, j.Lease))
		if got := h.claimN("w", 10); len(got) != 1 || got[0] != jobs[0].ID && got[0] != jobs[1].ID {
			t.Fatalf("claimed %v after acme's attempt expired, want one acme job", got)
		}
	})

	t.Run("QueueAndKeyLimitsApplyTogether", func(t *testing.T) {
		h := setup(t)
		h.ok(setLimits(fsm.DefaultQueue, store.QueueLimits{Concurrency: 3, KeyConcurrency: 2}))
		for range 4 {
			h.submit(keyed("a", 0), keyed("b", 0), keyed("c", 0))
		}
		if got := h.claimN("w", 100); len(got) != 3 {
			t.Fatalf("claimed %d, want the queue's 3", len(got))
		}
		running := map[string]int{}
		for _, j := range allJobs(t, h.f) {
			if j.Status == store.StatusRunning {
				running[j.ConcurrencyKey]++
			}
		}
		for k, n := range running {
			if n > 2 {
				t.Errorf("key %s runs %d, over its 2", k, n)
			}
		}
	})

	t.Run("QueueRateHandsOutBurstThenRateTimesElapsed", func(t *testing.T) {
		h := setup(t)
		h.ok(setLimits(fsm.DefaultQueue, store.QueueLimits{Rate: perSecond(2), Burst: 3}))
		for range 10 {
			h.submit(fsm.NewJob{Command: "x"})
		}
		if got := h.claimN("w", 10); len(got) != 3 {
			t.Fatalf("claimed %d at first, want the burst 3", len(got))
		}
		h.at(250 * time.Millisecond)
		if got := h.claimN("w", 10); len(got) != 0 {
			t.Fatalf("claimed %d a quarter second later, want 0 (half a token)", len(got))
		}
		due := h.f.NextDue()
		if want := ns(t0.Add(500 * time.Millisecond)); due != want {
			t.Errorf("NextDue %v, want the next token at %v", time.Unix(0, due).UTC(), time.Unix(0, want).UTC())
		}
		var pending *store.Job
		for _, j := range allJobs(t, h.f) {
			if j.Status == store.StatusPending {
				pending = j
				break
			}
		}
		if by := h.f.HeldBy(pending, ns(h.now)); !strings.HasPrefix(by, "queue default rate-limited until 2025-03-01T12:00:00.5Z") {
			t.Errorf("held by %q", by)
		}
		h.at(1500 * time.Millisecond)
		if got := h.claimN("w", 10); len(got) != 3 {
			t.Fatalf("claimed %d 1.5s in, want 3 (2 tokens a second)", len(got))
		}
	})

	t.Run("KeyRateLimitsEachKeyAlone", func(t *testing.T) {
		h := setup(t)
		h.ok(setLimits(fsm.DefaultQueue, store.QueueLimits{KeyRate: store.Rate{Count: 1, Per: int64(time.Minute)}, KeyBurst: 1}))
		h.submit(keyed("a", 5), keyed("a", 5), keyed("b", 0), keyed("b", 0))
		if got := h.claimN("w", 10); len(got) != 2 {
			t.Fatalf("claimed %v, want one of each key", got)
		}
		h.at(59 * time.Second)
		if got := h.claimN("w", 10); len(got) != 0 {
			t.Fatalf("claimed %v before a minute, want none", got)
		}
		h.at(time.Minute)
		if got := h.claimN("w", 10); len(got) != 2 {
			t.Fatalf("claimed %v after a minute, want one of each key", got)
		}
	})

	t.Run("LimitsAreSetBeforeTheQueueHasJobs", func(t *testing.T) {
		h := setup(t)
		h.ok(setLimits("later", store.QueueLimits{Concurrency: 1}))
		if fl := h.f.QueueLimits("later"); fl.Limits.Concurrency != 1 {
			t.Fatalf("limits %+v, want concurrency 1", fl.Limits)
		}
		h.submit(fsm.NewJob{Command: "a", Queue: "later"}, fsm.NewJob{Command: "b", Queue: "later"})
		if got := h.claim(fsm.Claim{WorkerID: "w", Queues: []string{"later"}, Max: 5}); len(got) != 1 {
			t.Fatalf("claimed %d, want 1", len(got))
		}
	})

	t.Run("RaisingALimitReopensAndRemovingItClearsBuckets", func(t *testing.T) {
		h := setup(t)
		h.ok(setLimits(fsm.DefaultQueue, store.QueueLimits{KeyConcurrency: 1, Rate: perSecond(1), Burst: 1}))
		h.submit(keyed("a", 0), keyed("a", 0), keyed("a", 0))
		if got := h.claimN("w", 10); len(got) != 1 {
			t.Fatalf("claimed %d, want 1", len(got))
		}
		ch := h.f.Changed()
		h.ok(setLimits(fsm.DefaultQueue, store.QueueLimits{KeyConcurrency: 3}))
		if !closed(ch) {
			t.Error("raising the limits did not wake the long-polls")
		}
		if got := h.claimN("w", 10); len(got) != 2 {
			t.Fatalf("claimed %d after raising the limits, want 2", len(got))
		}
		h.ok(setLimits(fsm.DefaultQueue, store.QueueLimits{}))
		if got := h.f.LimitedQueues(); len(got) != 0 {
			t.Errorf("limited queues %v after removing the limits", got)
		}
	})

	t.Run("SnapshotKeepsBucketsAndCounts", func(t *testing.T) {
		h := setup(t)
		h.ok(setLimits(fsm.DefaultQueue, store.QueueLimits{KeyConcurrency: 1, Rate: perSecond(1), Burst: 2}))
		h.submit(keyed("a", 0), keyed("a", 0), keyed("b", 0), keyed("c", 0))
		if got := h.claimN("w", 10); len(got) != 2 {
			t.Fatalf("claimed %d, want the burst 2", len(got))
		}
		g := snapshotRestore(t, h.f)
		for _, f := range []*fsm.FSM{h.f, g} {
			fl := f.QueueLimits(fsm.DefaultQueue)
			if fl.Running != 2 || fl.KeysFull != 2 || fl.RateLimitedUntil != ns(t0.Add(time.Second)) {
				t.Errorf("flow %+v, want 2 running, 2 keys full, rate-limited until t0+1s", fl)
			}
		}
		// The restored FSM hands out no token the original would not.
		h.f = g
		h.at(999 * time.Millisecond)
		if got := h.claimN("w", 10); len(got) != 0 {
			t.Fatalf("restored FSM claimed %v before the next token", got)
		}
		h.at(time.Second)
		if got := h.claimN("w", 10); len(got) != 1 {
			t.Fatalf("restored FSM claimed %v at the next token, want 1 (c's job)", got)
		}
		checkIndexes(t, h.f)
	})

	t.Run("BadLimitsAreRejected", func(t *testing.T) {
		cases := map[string]store.QueueLimits{
			"concurrency":     {Concurrency: -1},
			"key_concurrency": {KeyConcurrency: -2},
			"rate":            {Rate: store.Rate{Count: 1, Per: 0}},
			"burst":           {Rate: perSecond(1), Burst: fsm.MaxBurst + 1},
			"key_rate":        {KeyRate: store.Rate{Count: fsm.MaxRateCount + 1, Per: 1}},
			"key_burst":       {KeyBurst: -1},
		}
		for field, l := range cases {
			h := setup(t)
			var ve *fsm.ValidationError
			if err := h.one(setLimits("q", l)).Err; !errors.As(err, &ve) || ve.Field != field {
				t.Errorf("%s: err %v, want a ValidationError of %s", field, err, field)
			}
			if fl := h.f.QueueLimits("q"); !fl.Limits.IsZero() {
				t.Errorf("%s: limits %+v were set", field, fl.Limits)
			}
		}
	})

	t.Run("GangsAndSchedulesTakeNoKey", func(t *testing.T) {
		h := setup(t)
		var ve *fsm.ValidationError
		if err := h.one(submitGang(2, fsm.NewJob{Command: "g", ConcurrencyKey: "a"})).Err; !errors.As(err, &ve) || ve.Field != "job.concurrency_key" {
			t.Errorf("gang with a key: %v", err)
		}
		ps := fsm.Cmd{Op: fsm.OpPutSchedule, PutSchedule: &fsm.PutSchedule{Name: "s", Cron: "* * * * *", Job: fsm.NewJob{Command: "c", ConcurrencyKey: "a"},
			Overlap: fsm.OverlapAllow, Catchup: fsm.CatchupOne, Create: true}}
		if err := h.one(ps).Err; !errors.As(err, &ve) || ve.Field != "job.concurrency_key" {
			t.Errorf("schedule with a key: %v", err)
		}
	})

	t.Run("ARenewalIsNotANewAttempt", func(t *testing.T) {
		h := setup(t)
		h.ok(setLimits(fsm.DefaultQueue, store.QueueLimits{Concurrency: 1, KeyConcurrency: 1}))
		h.submit(keyed("a", 0), keyed("a", 0))
		j := h.claim(fsm.Claim{WorkerID: "w"})[0]
		ch := h.f.Changed()
		h.at(time.Second) // a later deadline: the lease is rewritten
		h.ok(heartbeat(j.ID, j.Lease, ttl))
		if got := h.job(j.ID).LeaseDeadline; got != ns(t0.Add(time.Second+ttl)) {
			t.Fatalf("deadline %v, want the renewed one", got)
		}
		h.at(2 * time.Second)
		h.ok(workerHeartbeat("w", ttl))
		if closed(ch) {
			t.Error("renewing a lease woke the long-polls, as if a key had reopened")
		}
		if fl := h.f.QueueLimits(fsm.DefaultQueue); fl.Running != 1 || fl.KeysFull != 1 {
			t.Errorf("flow %+v after renewals, want 1 running and 1 key full", fl)
		}
		h.ok(succeed(j.ID, j.Lease))
		if !closed(ch) {
			t.Error("the end of the attempt that held the limits did not wake the long-polls")
		}
	})

	t.Run("HeldKeysCostTheClaimNoScan", func(t *testing.T) {
		// 2,000 jobs of a full key: the ready tree holds none of them,
		// so the claim takes the one free job at once.
		h := setup(t)
		h.ok(setLimits(fsm.DefaultQueue, store.QueueLimits{KeyConcurrency: 1}))
		many := make([]fsm.NewJob, 1000)
		for i := range many {
			many[i] = keyed("big", 9)
		}
		h.submit(many...)
		h.submit(many...)
		h.claimN("w", 1)
		free := h.submit(keyed("small", 0))[0]
		if got := h.claimN("w", 5); len(got) != 1 || got[0] != free.ID {
			t.Fatalf("claimed %v, want [%s]", got, free.ID)
		}
		if n := fsm.ReadyLen(h.f, fsm.DefaultQueue); n != 0 {
			t.Errorf("ready trees hold %d items, want 0 (big is held)", n)
		}
	})
}
