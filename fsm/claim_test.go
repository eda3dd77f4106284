package fsm_test

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// drain claims one job at a time with c until none is left and returns the
// ids in claim order.
func (h *harness) drain(c fsm.Claim) []string {
	h.t.Helper()
	c.Max = 1
	var out []string
	for i := 0; i < 100; i++ {
		jobs := h.claim(c)
		if len(jobs) == 0 {
			return out
		}
		out = append(out, jobIDs(jobs)...)
	}
	h.t.Fatal("claims never ran dry")
	return nil
}

func TestClaim(t *testing.T) {
	t.Run("LeasesTheJobToTheWorker", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x", MaxAttempts: 3})
		h.at(2 * time.Second)
		r := h.ok(claimCmd(fsm.Claim{WorkerID: "w1", LeaseTTL: int64(ttl)}))
		if len(r.Jobs) != 1 {
			t.Fatalf("claimed %d jobs, want 1", len(r.Jobs))
		}
		j := h.job("job-1")
		if j.Status != store.StatusRunning || j.Attempts != 1 || j.WorkerID != "w1" || j.Lease != h.index ||
			j.StartedAt != ns(h.now) || j.LeaseDeadline != ns(h.now.Add(ttl)) || j.ModifyIndex != h.index {
			t.Fatalf("claimed job = %+v\nwant running, attempt 1, worker w1, lease %d, started now, deadline now+ttl", j, h.index)
		}
		if r.Jobs[0].Lease != j.Lease {
			t.Errorf("result lease %d, stored %d", r.Jobs[0].Lease, j.Lease)
		}
		w, err := h.f.Worker("w1")
		if err != nil {
			t.Fatalf("a claiming worker is registered implicitly: %v", err)
		}
		if w.LastHeartbeat != ns(h.now) || w.RegisteredAt != ns(h.now) {
			t.Errorf("worker = %+v, want registered and heard from now", w)
		}
		if got := h.f.Expired(ns(h.now.Add(ttl)), 10); len(got) != 1 || got[0] != (fsm.Lease{JobID: "job-1", Lease: h.index, WorkerID: "w1", Deadline: ns(h.now.Add(ttl))}) {
			t.Errorf("Expired at the deadline = %+v", got)
		}
		if got := h.f.Expired(ns(h.now.Add(ttl))-1, 10); len(got) != 0 {
			t.Errorf("Expired before the deadline = %+v, want none", got)
		}
	})

	t.Run("EmptyQueueLeasesNothingAndRegistersNoOne", func(t *testing.T) {
		h := setup(t)
		if jobs := h.claim(fsm.Claim{WorkerID: "w1"}); len(jobs) != 0 {
			t.Fatalf("claimed %v from an empty store", jobIDs(jobs))
		}
		if _, err := h.f.Worker("w1"); !errors.Is(err, fsm.ErrWorkerNotFound) {
			t.Fatalf("worker after an empty claim: %v, want ErrWorkerNotFound", err)
		}
	})

	t.Run("EmptyWorkerIDIsInvalid", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x"})
		r := h.reject(claimCmd(fsm.Claim{LeaseTTL: int64(ttl)}), nil)
		var ve *fsm.ValidationError
		if !errors.As(r.Err, &ve) || ve.Field != "worker_id" {
			t.Fatalf("err = %v, want a worker_id ValidationError", r.Err)
		}
	})

	t.Run("HigherPriorityFirstThenRunAtThenSubmission", func(t *testing.T) {
		h := setup(t)
		h.submit(
			fsm.NewJob{Command: "low"},                                      // job-1
			fsm.NewJob{Command: "high", Priority: 10},                       // job-2
			fsm.NewJob{Command: "late run", RunAt: ns(t0.Add(time.Second))}, // job-3
			fsm.NewJob{Command: "mid", Priority: 5},                         // job-4
			fsm.NewJob{Command: "low too"},                                  // job-5
			fsm.NewJob{Command: "negative", Priority: -1},                   // job-6
		)
		// job-7 was submitted last but is due before job-3.
		h.at(500 * time.Millisecond).submit(fsm.NewJob{Command: "early run"})
		h.at(time.Minute)
		got := h.drain(fsm.Claim{WorkerID: "w"})
		want := []string{"job-2", "job-4", "job-1", "job-5", "job-7", "job-3", "job-6"}
		if !slices.Equal(got, want) {
			t.Fatalf("claim order = %v, want %v", got, want)
		}
	})

	t.Run("QueuesInPreferenceOrder", func(t *testing.T) {
		h := setup(t)
		h.submit(
			fsm.NewJob{Command: "a", Queue: "bulk", Priority: 100}, // job-1
			fsm.NewJob{Command: "b", Queue: "urgent"},              // job-2
			fsm.NewJob{Command: "c", Queue: "bulk"},                // job-3
			fsm.NewJob{Command: "d", Queue: "urgent"},              // job-4
			fsm.NewJob{Command: "e"},                               // job-5, default
		)
		got := h.drain(fsm.Claim{WorkerID: "w", Queues: []string{"urgent", "bulk"}})
		if want := []string{"job-2", "job-4", "job-1", "job-3"}; !slices.Equal(got, want) {
			t.Fatalf("claim order = %v, want %v", got, want)
		}
		// No queues means the default queue only.
		if got := h.drain(fsm.Claim{WorkerID: "w"}); !slices.Equal(got, []string{"job-5"}) {
			t.Fatalf("claim without queues = %v, want [job-5]", got)
		}
	})

	t.Run("DelayedJobWaitsForAnEntryPastItsRunAt", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "later", RunAt: ns(t0.Add(10 * time.Second))})
		if due := h.f.NextDue(); due != ns(t0.Add(10*time.Second)) {
			t.Fatalf("NextDue = %d, want t0+10s", due)
		}
		h.at(9 * time.Second)
		if h.f.Claimable(nil, nil, false, ns(h.now)) {
			t.Error("Claimable before the run time")
		}
		if jobs := h.claim(fsm.Claim{WorkerID: "w"}); len(jobs) != 0 {
			t.Fatalf("claimed %v before its run time", jobIDs(jobs))
		}
		if !h.f.Claimable(nil, nil, false, ns(t0.Add(10*time.Second))) {
			t.Error("not Claimable at the run time")
		}
		// The claim is decided by the entry's time, not by the caller's.
		h.at(10 * time.Second)
		if j := h.claimOne("w"); j.ID != "job-1" {
			t.Fatalf("claimed %s, want job-1", j.ID)
		}
		if due := h.f.NextDue(); due != 0 {
			t.Fatalf("NextDue with nothing delayed = %d, want 0", due)
		}
	})

	t.Run("TypedJobsOnlyToClaimsListingTheType", func(t *testing.T) {
		h := setup(t)
		h.submit(
			fsm.NewJob{Command: "shell"},                  // job-1
			fsm.NewJob{Type: "resize", Priority: 1},       // job-2
			fsm.NewJob{Type: "email", Priority: 2},        // job-3
			fsm.NewJob{Command: "shell too", Priority: 3}, // job-4
			fsm.NewJob{Type: "resize"},                    // job-5
		)
		got := h.drain(fsm.Claim{WorkerID: "typed", Types: []string{"resize"}})
		if want := []string{"job-2", "job-5"}; !slices.Equal(got, want) {
			t.Fatalf("typed claim = %v, want %v", got, want)
		}
		got = h.drain(fsm.Claim{WorkerID: "both", Types: []string{"email"}, Shell: true})
		if want := []string{"job-4", "job-3", "job-1"}; !slices.Equal(got, want) {
			t.Fatalf("typed+shell claim = %v, want %v", got, want)
		}
	})

	t.Run("ClaimWithoutTypesGetsOnlyShellJobs", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Type: "resize", Priority: 5}, fsm.NewJob{Command: "ls"})
		if got := h.drain(fsm.Claim{WorkerID: "w"}); !slices.Equal(got, []string{"job-2"}) {
			t.Fatalf("untyped claim = %v, want [job-2]", got)
		}
		if h.f.Claimable(nil, nil, false, ns(h.now)) {
			t.Error("Claimable for a shell worker while only a typed job is left")
		}
		if !h.f.Claimable(nil, []string{"resize"}, false, ns(h.now)) {
			t.Error("not Claimable for a resize worker")
		}
	})

	t.Run("MaxLeasesSeveralEachWithItsOwnLease", func(t *testing.T) {
		h := setup(t)
		for i := 0; i < 5; i++ {
			h.submit(fsm.NewJob{Command: "x"})
		}
		jobs := h.claim(fsm.Claim{WorkerID: "w", Max: 3})
		if got := jobIDs(jobs); !slices.Equal(got, []string{"job-1", "job-2", "job-3"}) {
			t.Fatalf("claimed %v, want the first three", got)
		}
		for i, j := range jobs {
			if want := h.index + uint64(i); j.Lease != want || j.Attempts != 1 || j.Status != store.StatusRunning {
				t.Errorf("job %s lease %d attempts %d %s, want lease %d attempt 1 running", j.ID, j.Lease, j.Attempts, j.Status, want)
			}
		}
		if jobs := h.claim(fsm.Claim{WorkerID: "w", Max: 10}); len(jobs) != 2 {
			t.Fatalf("second claim got %d jobs, want the 2 left", len(jobs))
		}
	})

	t.Run("MaxIsCapped", func(t *testing.T) {
		h := setup(t)
		many := make([]fsm.NewJob, fsm.MaxClaim+5)
		for i := range many {
			many[i].Command = "x"
		}
		h.submit(many...)
		if jobs := h.claim(fsm.Claim{WorkerID: "w", Max: 1 << 20}); len(jobs) != fsm.MaxClaim {
			t.Fatalf("claimed %d jobs, want MaxClaim %d", len(jobs), fsm.MaxClaim)
		}
		if jobs := h.claim(fsm.Claim{WorkerID: "w", Max: -3}); len(jobs) != 1 {
			t.Fatalf("claim with Max -3 got %d jobs, want 1", len(jobs))
		}
	})

	t.Run("HugeLeaseTTLMeansFarOffNotThePast", func(t *testing.T) {
		// The API proposes its --lease-ttl; a hand-made entry may carry
		// anything. now + TTL past the int64 range must not wrap into a
		// deadline that has long passed.
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x"}, fsm.NewJob{Command: "y", Timeout: math.MaxInt64})
		jobs := h.claim(fsm.Claim{WorkerID: "w", Max: 2, LeaseTTL: math.MaxInt64})
		if len(jobs) != 2 {
			t.Fatalf("claimed %d jobs, want 2", len(jobs))
		}
		for _, j := range jobs {
			if j.LeaseDeadline != math.MaxInt64 {
				t.Errorf("job %s: lease deadline %d, want math.MaxInt64", j.ID, j.LeaseDeadline)
			}
		}
		if got := h.f.Expired(h.now.Add(1000*time.Hour).UnixNano(), 10); len(got) != 0 {
			t.Fatalf("leases %+v expired, want none", got)
		}
		r := h.ok(heartbeat("job-1", jobs[0].Lease, time.Duration(math.MaxInt64)))
		if r.Deadline != math.MaxInt64 {
			t.Fatalf("heartbeat deadline %d, want math.MaxInt64", r.Deadline)
		}
		h.reject(expire("job-1", jobs[0].Lease), fsm.ErrConflict)
	})

	t.Run("AttemptsCountUpAndLeasesNeverRepeat", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "flaky", MaxAttempts: 3})
		var leases []uint64
		for attempt := 1; attempt <= 3; attempt++ {
			j := h.claimOne("w")
			if j.Attempts != attempt {
				t.Fatalf("attempt %d: Attempts = %d", attempt, j.Attempts)
			}
			leases = append(leases, j.Lease)
			h.ok(fail(j.ID, j.Lease, "boom"))
		}
		if !slices.IsSorted(leases) || leases[0] == leases[1] || leases[1] == leases[2] {
			t.Fatalf("leases %v, want strictly increasing", leases)
		}
		h.status(store.StatusFailed, "job-1")
	})

	t.Run("PausedQueueIsNotClaimedUntilResumed", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "a", Queue: "q"}, fsm.NewJob{Command: "b", Queue: "other"})
		h.ok(pause("q", true))
		if h.f.Claimable([]string{"q"}, nil, false, ns(h.now)) {
			t.Error("Claimable from a paused queue")
		}
		// A paused queue is skipped, not a stop: the next queue is served.
		if got := h.drain(fsm.Claim{WorkerID: "w", Queues: []string{"q", "other"}}); !slices.Equal(got, []string{"job-2"}) {
			t.Fatalf("claim with q paused = %v, want [job-2]", got)
		}
		if qs := h.f.Queues(); len(qs) != 2 || qs[1].Name != "q" || !qs[1].Paused || qs[0].Paused {
			t.Fatalf("Queues = %+v, want q paused and other not", qs)
		}
		changed := h.f.Changed()
		h.ok(pause("q", false))
		if !closed(changed) {
			t.Error("resuming a queue did not signal Changed")
		}
		if got := h.drain(fsm.Claim{WorkerID: "w", Queues: []string{"q"}}); !slices.Equal(got, []string{"job-1"}) {
			t.Fatalf("claim after resume = %v, want [job-1]", got)
		}
	})

	t.Run("PausedQueueSurvivesRestore", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "a"})
		h.ok(pause(fsm.DefaultQueue, true))
		h.f = snapshotRestore(t, h.f)
		if got := h.drain(fsm.Claim{WorkerID: "w"}); len(got) != 0 {
			t.Fatalf("claimed %v from a paused queue after restore", got)
		}
	})

	t.Run("EmptyQueueNameCannotBePaused", func(t *testing.T) {
		h := setup(t)
		r := h.one(pause("", true))
		var ve *fsm.ValidationError
		if !errors.As(r.Err, &ve) || ve.Field != "name" {
			t.Fatalf("err = %v, want a name ValidationError", r.Err)
		}
		if qs := h.f.Queues(); len(qs) != 0 {
			t.Fatalf("Queues = %+v, want none", qs)
		}
	})
}
