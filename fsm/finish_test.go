package fsm_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

func TestBackoff(t *testing.T) {
	// runAttempts claims the job once per step, fails it with the step's
	// draw and checks the retry is due exactly delay later and not before.
	type step struct {
		draw  float64
		delay time.Duration
	}
	runAttempts := func(t *testing.T, b store.Backoff, steps []step) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "flaky", MaxAttempts: len(steps) + 1, Backoff: b})
		for i, s := range steps {
			j := h.claimOne("w")
			h.at(h.now.Sub(t0) + 3*time.Second)
			h.ok(report(fsm.Report{JobID: j.ID, Lease: j.Lease, Error: "boom", Draw: s.draw}))
			got := h.job(j.ID)
			if got.Status != store.StatusPending || got.RunAt != ns(h.now.Add(s.delay)) {
				t.Fatalf("after attempt %d (draw %v): %s, retry in %v; want pending, retry in %v",
					i+1, s.draw, got.Status, time.Duration(got.RunAt-ns(h.now)), s.delay)
			}
			due := h.now.Add(s.delay)
			if s.delay > 0 {
				h.at(due.Sub(t0) - time.Nanosecond)
				if jobs := h.claim(fsm.Claim{WorkerID: "w"}); len(jobs) != 0 {
					t.Fatalf("attempt %d: retried before its backoff ended", i+1)
				}
			}
			h.at(due.Sub(t0))
		}
	}

	t.Run("DelayDoublesUpToMaxPlusJitterTimesDraw", func(t *testing.T) {
		runAttempts(t, store.Backoff{Base: int64(time.Second), Max: int64(5 * time.Second), Jitter: 0.5}, []step{
			{0.5, 1250 * time.Millisecond},  // 1s + 1s·0.5·0.5
			{0, 2 * time.Second},            // 2s
			{0.75, 5500 * time.Millisecond}, // 4s + 4s·0.5·0.75
			{0.25, 5625 * time.Millisecond}, // min(8s, 5s) + 5s·0.5·0.25
			{0, 5 * time.Second},            // capped
			{1, 5 * time.Second},            // a draw outside [0,1) counts as 0
			{-0.5, 5 * time.Second},
		})
	})

	t.Run("ZeroMaxMeansNoCap", func(t *testing.T) {
		runAttempts(t, store.Backoff{Base: int64(time.Second)}, []step{
			{0, time.Second}, {0, 2 * time.Second}, {0, 4 * time.Second}, {0, 8 * time.Second},
		})
	})

	t.Run("ZeroBaseRetriesAtOnce", func(t *testing.T) {
		runAttempts(t, store.Backoff{Max: int64(time.Minute), Jitter: 1}, []step{{0.5, 0}, {0.9, 0}})
	})

	t.Run("HugeDelaysSaturateInsteadOfOverflowing", func(t *testing.T) {
		// base·jitter·draw overflows int64 as a float; converting that is
		// CPU-dependent, so nodes on amd64 and arm64 would disagree.
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x", MaxAttempts: 2, Backoff: store.Backoff{Base: math.MaxInt64 / 2, Jitter: 10}})
		h.ok(report(fsm.Report{JobID: h.claimOne("w").ID, Error: "boom", Draw: 0.99}))
		if got, want := h.job("job-1").RunAt, ns(h.now.Add(100*365*24*time.Hour)); got != want {
			t.Fatalf("retry at %d, want now + 100 years (%d)", got, want)
		}
	})

	t.Run("ExpireUsesItsDraw", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x", MaxAttempts: 2, Backoff: store.Backoff{Base: int64(4 * time.Second), Jitter: 1}})
		j := h.claimOne("w")
		h.at(ttl)
		h.ok(fsm.Cmd{Op: fsm.OpExpire, Expire: &fsm.Expire{JobID: j.ID, Lease: j.Lease, Draw: 0.5}})
		if got := h.job(j.ID).RunAt; got != ns(h.now.Add(6*time.Second)) {
			t.Fatalf("retry in %v, want 6s", time.Duration(got-ns(h.now)))
		}
	})
}

func TestFailure(t *testing.T) {
	t.Run("LastAttemptFailsTheJob", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x", MaxAttempts: 2})
		h.ok(fail(h.claimOne("w").ID, 0, "first"))
		h.status(store.StatusPending, "job-1")
		h.ok(report(fsm.Report{JobID: h.claimOne("w").ID, Error: "second", ExitCode: intp(2)}))
		j := h.job("job-1")
		if j.Status != store.StatusFailed || j.LastError != "second" || j.DoneAt != ns(h.now) || j.Attempts != 2 || *j.ExitCode != 2 {
			t.Fatalf("job = %+v, want failed after 2 attempts with the last error", j)
		}
		if len(j.History) != 2 || j.History[0].Error != "first" || j.History[1].Error != "second" || *j.History[1].ExitCode != 2 {
			t.Fatalf("history = %+v", j.History)
		}
		if jobs := h.claim(fsm.Claim{WorkerID: "w"}); len(jobs) != 0 {
			t.Fatalf("claimed a failed job: %v", jobIDs(jobs))
		}
	})

	t.Run("FinalReportFailsAtOnce", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x", MaxAttempts: 5})
		h.ok(report(fsm.Report{JobID: h.claimOne("w").ID, Error: "bad input", Final: true}))
		if j := h.job("job-1"); j.Status != store.StatusFailed || j.Attempts != 1 || j.LastError != "bad input" {
			t.Fatalf("job = %s attempts %d %q, want failed after 1 with the error", j.Status, j.Attempts, j.LastError)
		}
	})

	t.Run("MessageWithoutAnError", func(t *testing.T) {
		cases := []struct {
			name string
			exit *int
			want string
		}{
			{"ExitCode", intp(3), "exit status 3"},
			{"Nothing", nil, "failed"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				h := setup(t)
				h.submit(fsm.NewJob{Command: "x"})
				h.ok(report(fsm.Report{JobID: h.claimOne("w").ID, ExitCode: c.exit}))
				if got := h.job("job-1").LastError; got != c.want {
					t.Fatalf("last error = %q, want %q", got, c.want)
				}
			})
		}
	})

	t.Run("HistoryKeepsTheLastMaxHistoryAttempts", func(t *testing.T) {
		h := setup(t)
		n := fsm.MaxHistory + 5
		h.submit(fsm.NewJob{Command: "x", MaxAttempts: n})
		for i := 0; i < n; i++ {
			h.ok(fail(h.claimOne("w").ID, 0, "boom"))
		}
		j := h.job("job-1")
		if j.Status != store.StatusFailed || len(j.History) != fsm.MaxHistory {
			t.Fatalf("job %s with %d history entries, want failed with %d", j.Status, len(j.History), fsm.MaxHistory)
		}
		if first, last := j.History[0].Attempt, j.History[len(j.History)-1].Attempt; first != 6 || last != n {
			t.Fatalf("history covers attempts %d..%d, want 6..%d", first, last, n)
		}
	})

	t.Run("OutputOverMaxOutputKeepsItsTail", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x"}, fsm.NewJob{Command: "y"}, fsm.NewJob{Command: "z"})
		out := strings.Repeat("a", 1000) + strings.Repeat("b", fsm.MaxOutput)
		h.ok(report(fsm.Report{JobID: h.claimOne("w").ID, Success: true, Output: out}))
		if got := h.job("job-1").Output; got != strings.Repeat("b", fsm.MaxOutput) {
			t.Fatalf("output kept %d bytes starting %q, want the last %d", len(got), got[:min(len(got), 8)], fsm.MaxOutput)
		}
		// A cut inside a multi-byte character starts after it.
		out = "x" + strings.Repeat("é", fsm.MaxOutput/2) + "z"
		h.ok(report(fsm.Report{JobID: h.claimOne("w").ID, Success: true, Output: out}))
		got := h.job("job-2").Output
		if !utf8.ValidString(got) || len(got) != fsm.MaxOutput-1 || !strings.HasSuffix(out, got) {
			t.Fatalf("output kept %d bytes (valid UTF-8 %v), want the last %d starting on a rune", len(got), utf8.ValidString(got), fsm.MaxOutput-1)
		}
		long := strings.Repeat("e", 2*fsm.MaxOutput)
		h.ok(report(fsm.Report{JobID: h.claimOne("w").ID, Error: long, Output: "short"}))
		if j := h.job("job-3"); len(j.LastError) != fsm.MaxOutput || j.Output != "short" {
			t.Fatalf("error kept %d bytes, output %q; want %d and short", len(j.LastError), j.Output, fsm.MaxOutput)
		}
	})
}

func TestDependencies(t *testing.T) {
	// chain submits job-1 ← job-2 ← job-3, each depending on the previous.
	chain := func(t *testing.T, first fsm.NewJob) *harness {
		h := setup(t)
		first.Command = "first"
		h.submit(first,
			fsm.NewJob{Command: "second", DependsOn: []string{"$0"}},
			fsm.NewJob{Command: "third", DependsOn: []string{"$1"}})
		return h
	}

	t.Run("ParentDoneUnblocksChild", func(t *testing.T) {
		h := chain(t, fsm.NewJob{})
		j := h.claimOne("w")
		changed := h.f.Changed()
		h.at(time.Minute).ok(succeed(j.ID, j.Lease))
		if !closed(changed) {
			t.Error("unblocking a job did not signal Changed")
		}
		b := h.job("job-2")
		if b.Status != store.StatusPending || b.Waiting != 0 || b.RunAt != ns(h.now) {
			t.Fatalf("job-2 = %s waiting %d run at %d, want pending now", b.Status, b.Waiting, b.RunAt)
		}
		h.status(store.StatusBlocked, "job-3")
		if got := h.drain(fsm.Claim{WorkerID: "w"}); !slices.Equal(got, []string{"job-2"}) {
			t.Fatalf("claimable = %v, want [job-2]", got)
		}
		h.ok(succeed("job-2", 0))
		h.status(store.StatusPending, "job-3")
	})

	t.Run("ChildWaitsForEveryParent", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "a"}, fsm.NewJob{Command: "b"}, fsm.NewJob{Command: "join", DependsOn: []string{"$0", "$1"}})
		jobs := h.claim(fsm.Claim{WorkerID: "w", Max: 2})
		h.ok(succeed(jobs[1].ID, 0))
		if c := h.job("job-3"); c.Status != store.StatusBlocked || c.Waiting != 1 {
			t.Fatalf("job-3 = %s waiting %d, want blocked 1", c.Status, c.Waiting)
		}
		h.ok(succeed(jobs[0].ID, 0))
		h.status(store.StatusPending, "job-3")
	})

	t.Run("ChildKeepsALaterRunAt", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "a"}, fsm.NewJob{Command: "b", DependsOn: []string{"$0"}, RunAt: ns(t0.Add(time.Hour))})
		h.ok(succeed(h.claimOne("w").ID, 0))
		if b := h.job("job-2"); b.Status != store.StatusPending || b.RunAt != ns(t0.Add(time.Hour)) {
			t.Fatalf("job-2 = %s run at %d, want pending at t0+1h", b.Status, b.RunAt)
		}
		if h.f.NextDue() != ns(t0.Add(time.Hour)) {
			t.Fatalf("NextDue = %d, want t0+1h", h.f.NextDue())
		}
		if jobs := h.claim(fsm.Claim{WorkerID: "w"}); len(jobs) != 0 {
			t.Fatalf("claimed %v before its run time", jobIDs(jobs))
		}
	})

	t.Run("ParentFailingForGoodFailsEveryDescendant", func(t *testing.T) {
		h := chain(t, fsm.NewJob{MaxAttempts: 1})
		h.at(time.Minute).ok(fail(h.claimOne("w").ID, 0, "boom"))
		b, c := h.job("job-2"), h.job("job-3")
		if b.Status != store.StatusFailed || b.LastError != "dependency job-1 failed" || b.DoneAt != ns(h.now) {
			t.Errorf("job-2 = %s %q done %d, want failed naming job-1", b.Status, b.LastError, b.DoneAt)
		}
		if c.Status != store.StatusFailed || c.LastError != "dependency job-2 failed" {
			t.Errorf("job-3 = %s %q, want failed naming job-2", c.Status, c.LastError)
		}
	})

	t.Run("ParentExpiringForGoodFailsItsDependents", func(t *testing.T) {
		h := chain(t, fsm.NewJob{})
		j := h.claimOne("w")
		h.at(ttl).ok(expire(j.ID, j.Lease))
		h.status(store.StatusFailed, "job-1", "job-2", "job-3")
	})

	t.Run("ParentWithRetriesLeftKeepsChildBlocked", func(t *testing.T) {
		h := chain(t, fsm.NewJob{MaxAttempts: 2})
		h.ok(fail(h.claimOne("w").ID, 0, "boom"))
		h.status(store.StatusPending, "job-1")
		h.status(store.StatusBlocked, "job-2", "job-3")
	})

	t.Run("CancelWithCascadeCancelsDependents", func(t *testing.T) {
		h := chain(t, fsm.NewJob{})
		h.ok(cancel("job-1", true))
		h.status(store.StatusCancelled, "job-1", "job-2", "job-3")
		if got := h.job("job-3").LastError; got != "dependency job-2 cancelled" {
			t.Fatalf("job-3 last error = %q, want it to name job-2", got)
		}
	})

	t.Run("CancelWithoutCascadeLeavesDependentsBlocked", func(t *testing.T) {
		h := chain(t, fsm.NewJob{})
		h.ok(cancel("job-1", false))
		h.status(store.StatusCancelled, "job-1")
		h.status(store.StatusBlocked, "job-2", "job-3")
	})

	t.Run("CancelOfARunningJobWithCascadeCancelsDependentsAtOnce", func(t *testing.T) {
		h := chain(t, fsm.NewJob{MaxAttempts: 3})
		j := h.claimOne("w")
		h.ok(cancel(j.ID, true))
		h.status(store.StatusCancelling, "job-1")
		h.status(store.StatusCancelled, "job-2", "job-3")
		h.ok(fail(j.ID, j.Lease, "killed"))
		h.status(store.StatusCancelled, "job-1", "job-2", "job-3")
	})

	t.Run("CancelOfARunningJobWithoutCascadeLeavesDependentsBlocked", func(t *testing.T) {
		h := chain(t, fsm.NewJob{MaxAttempts: 3})
		j := h.claimOne("w")
		h.ok(cancel(j.ID, false))
		h.ok(fail(j.ID, j.Lease, "killed"))
		h.status(store.StatusCancelled, "job-1")
		h.status(store.StatusBlocked, "job-2", "job-3")
		// Retrying the parent lets them run after all.
		h.ok(retry("job-1"))
		h.ok(succeed(h.claimOne("w").ID, 0))
		h.status(store.StatusPending, "job-2")
	})

	t.Run("RetryingAFailedParentRevivesTheDependentsItFailed", func(t *testing.T) {
		h := chain(t, fsm.NewJob{MaxAttempts: 1})
		h.at(time.Minute).ok(fail(h.claimOne("w").ID, 0, "boom"))
		h.status(store.StatusFailed, "job-1", "job-2", "job-3")
		// The plain retry (op "retry") leaves them failed, as nodes did
		// before retry_deps existed.
		h.ok(retry("job-1"))
		h.status(store.StatusFailed, "job-2", "job-3")
		h.at(time.Minute).ok(fail(h.claimOne("w").ID, 0, "boom again"))

		r := h.at(time.Minute).ok(retryDeps("job-1"))
		if got := jobIDs(r.Jobs); !slices.Equal(got, []string{"job-1", "job-2", "job-3"}) {
			t.Fatalf("retry answered %v, want job-1 then the revived job-2, job-3", got)
		}
		h.status(store.StatusPending, "job-1")
		h.status(store.StatusBlocked, "job-2", "job-3")
		for _, id := range []string{"job-2", "job-3"} {
			if j := h.job(id); j.Waiting != 1 || j.LastError != "" || j.DoneAt != 0 || j.ExpireAt != 0 {
				t.Errorf("%s = waiting %d, error %q, done %d, expire %d; want waiting 1 and the end undone", id, j.Waiting, j.LastError, j.DoneAt, j.ExpireAt)
			}
		}
		h.ok(succeed(h.claimOne("w").ID, 0))
		h.ok(succeed(h.claimOne("w").ID, 0))
		h.ok(succeed(h.claimOne("w").ID, 0))
		h.status(store.StatusDone, "job-1", "job-2", "job-3")
	})

	t.Run("RetryingACancelledParentRevivesTheDependentsItCancelled", func(t *testing.T) {
		h := chain(t, fsm.NewJob{})
		h.ok(cancel("job-1", true))
		h.ok(retryDeps("job-1"))
		h.status(store.StatusPending, "job-1")
		h.status(store.StatusBlocked, "job-2", "job-3")
	})

	t.Run("RetryLeavesDependentsThatEndedForOtherReasons", func(t *testing.T) {
		h := setup(t)
		// job-3 depends on job-1 and job-2; job-4 on job-1 alone but was
		// cancelled by hand before job-1 failed.
		h.submit(fsm.NewJob{Command: "a", MaxAttempts: 1}, fsm.NewJob{Command: "b", MaxAttempts: 1},
			fsm.NewJob{Command: "c", DependsOn: []string{"$0", "$1"}}, fsm.NewJob{Command: "d", DependsOn: []string{"$0"}})
		h.ok(cancel("job-4", false))
		h.ok(fail(h.claimOne("w").ID, 0, "boom")) // job-1: job-3 fails naming it
		h.ok(fail(h.claimOne("w").ID, 0, "boom")) // job-2
		h.ok(retryDeps("job-1"))
		h.status(store.StatusPending, "job-1")
		// job-3 still has a failed dependency, job-2: it stays failed.
		h.status(store.StatusFailed, "job-2", "job-3")
		h.status(store.StatusCancelled, "job-4")
		if got := h.job("job-4").LastError; got != "cancelled" {
			t.Fatalf("job-4 error = %q, want its own cancel", got)
		}
	})

	t.Run("CancelOfABlockedJobCascadesToItsOwnDependents", func(t *testing.T) {
		h := chain(t, fsm.NewJob{})
		h.ok(cancel("job-2", true))
		h.status(store.StatusPending, "job-1")
		h.status(store.StatusCancelled, "job-2", "job-3")
		// The parent finishing later leaves the cancelled child alone.
		h.ok(succeed(h.claimOne("w").ID, 0))
		h.status(store.StatusCancelled, "job-2", "job-3")
	})
}

func TestCancel(t *testing.T) {
	t.Run("PendingJobIsCancelledAtOnce", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x"}, fsm.NewJob{Command: "later", RunAt: ns(t0.Add(time.Hour))})
		h.at(time.Second)
		for _, id := range []string{"job-1", "job-2"} {
			r := h.ok(cancel(id, false))
			if j := r.Jobs[0]; j.Status != store.StatusCancelled || j.LastError != "cancelled" || j.DoneAt != ns(h.now) {
				t.Fatalf("%s = %s %q done %d, want cancelled now", id, j.Status, j.LastError, j.DoneAt)
			}
		}
		if h.f.NextDue() != 0 || h.f.Claimable(nil, nil, false, ns(t0.Add(2*time.Hour))) {
			t.Fatal("a cancelled job is still due")
		}
		if jobs := h.at(2 * time.Hour).claim(fsm.Claim{WorkerID: "w"}); len(jobs) != 0 {
			t.Fatalf("claimed cancelled jobs %v", jobIDs(jobs))
		}
	})

	t.Run("RunningJobIsCancellingUntilItsWorkerReports", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x", MaxAttempts: 3})
		j := h.claimOne("w")
		r := h.ok(cancel(j.ID, false))
		if got := r.Jobs[0]; got.Status != store.StatusCancelling || got.Lease != j.Lease || got.LeaseDeadline != j.LeaseDeadline {
			t.Fatalf("after cancel: %s lease %d deadline %d, want cancelling with the lease kept", got.Status, got.Lease, got.LeaseDeadline)
		}
		if got := h.f.Expired(j.LeaseDeadline, 10); len(got) != 1 {
			t.Fatalf("a cancelling job's lease left the index: %+v", got)
		}
		// Cancelling again changes nothing.
		before := jobsJSON(t, h.f)
		if r := h.ok(cancel(j.ID, true)); r.Jobs[0].Status != store.StatusCancelling || jobsJSON(t, h.f) != before {
			t.Fatalf("second cancel: %s, or changed the job", r.Jobs[0].Status)
		}
		hb := h.ok(heartbeat(j.ID, j.Lease, ttl))
		if want := []fsm.Action{{JobID: j.ID, Lease: j.Lease, Action: "cancel"}}; !slices.Equal(hb.Actions, want) {
			t.Fatalf("heartbeat actions = %+v, want %+v", hb.Actions, want)
		}
		h.at(time.Second).ok(report(fsm.Report{JobID: j.ID, Lease: j.Lease, Error: "killed", ExitCode: intp(-1)}))
		got := h.job(j.ID)
		if got.Status != store.StatusCancelled || got.DoneAt != ns(h.now) || got.LastError != "killed" {
			t.Fatalf("after the worker's report: %s done %d %q, want cancelled (not retried)", got.Status, got.DoneAt, got.LastError)
		}
		if last := got.History[len(got.History)-1]; last.Status != store.StatusCancelled || last.Lease != j.Lease {
			t.Fatalf("last attempt = %+v, want cancelled", last)
		}
	})

	t.Run("CancellingJobWhoseLeaseExpiresIsCancelled", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x", MaxAttempts: 3})
		j := h.claimOne("w")
		h.ok(cancel(j.ID, false))
		h.at(ttl).ok(expire(j.ID, j.Lease))
		h.status(store.StatusCancelled, j.ID)
	})

	t.Run("CancellingJobThatFinishesAnywayIsDone", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x"})
		j := h.claimOne("w")
		h.ok(cancel(j.ID, false))
		h.ok(succeed(j.ID, j.Lease))
		h.status(store.StatusDone, j.ID)
	})

	t.Run("FinishedJobCannotBeCancelled", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "done"}, fsm.NewJob{Command: "failed"}, fsm.NewJob{Command: "cancelled"})
		h.ok(succeed(h.claimOne("w").ID, 0))
		h.ok(fail(h.claimOne("w").ID, 0, "x"))
		h.ok(cancel("job-3", false))
		for id, st := range map[string]store.Status{"job-1": store.StatusDone, "job-2": store.StatusFailed, "job-3": store.StatusCancelled} {
			r := h.reject(cancel(id, true), fsm.ErrConflict)
			var se *fsm.StateError
			if !errors.As(r.Err, &se) || se.JobID != id || se.Status != string(st) || se.Op != "cancel" {
				t.Errorf("cancel %s: err %#v, want a StateError naming %s", id, r.Err, st)
			}
		}
	})

	t.Run("UnknownJob", func(t *testing.T) {
		h := setup(t)
		h.reject(cancel("job-9", false), fsm.ErrNotFound)
	})
}

func TestRetry(t *testing.T) {
	t.Run("FailedJobStartsOverWithAFreshBudget", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x", MaxAttempts: 2, Backoff: store.Backoff{Base: int64(time.Hour)}})
		h.ok(fail(h.claimOne("w").ID, 0, "one"))
		h.at(time.Hour)
		h.ok(fail(h.claimOne("w").ID, 0, "two"))
		h.status(store.StatusFailed, "job-1")
		changed := h.f.Changed()
		h.at(2 * time.Hour)
		r := h.ok(retry("job-1"))
		if j := r.Jobs[0]; j.Status != store.StatusPending || j.Attempts != 0 || j.RunAt != ns(h.now) || j.DoneAt != 0 {
			t.Fatalf("after retry: %s attempts %d run at %d done %d, want pending, 0, now, 0", j.Status, j.Attempts, j.RunAt, j.DoneAt)
		}
		if !closed(changed) {
			t.Error("retry did not signal Changed")
		}
		// Two more attempts, as the job first had.
		h.ok(fail(h.claimOne("w").ID, 0, "three"))
		h.status(store.StatusPending, "job-1")
		if j := h.job("job-1"); len(j.History) != 3 {
			t.Fatalf("history has %d attempts, want all 3 kept", len(j.History))
		}
	})

	t.Run("CancelledJobCanBeRetried", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x"})
		h.ok(cancel("job-1", false))
		h.ok(retry("job-1"))
		if j := h.claimOne("w"); j.ID != "job-1" || j.Attempts != 1 {
			t.Fatalf("claimed %s attempt %d, want job-1 attempt 1", j.ID, j.Attempts)
		}
	})

	t.Run("RetriedJobWaitsForUnfinishedDependencies", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "a"}, fsm.NewJob{Command: "b"}, fsm.NewJob{Command: "c", DependsOn: []string{"$0", "$1"}})
		h.ok(cancel("job-3", false))
		h.ok(succeed(h.claimOne("w").ID, 0)) // job-1 done
		h.ok(retry("job-3"))
		if j := h.job("job-3"); j.Status != store.StatusBlocked || j.Waiting != 1 {
			t.Fatalf("job-3 = %s waiting %d, want blocked on job-2 only", j.Status, j.Waiting)
		}
		h.ok(succeed(h.claimOne("w").ID, 0)) // job-2 done
		h.status(store.StatusPending, "job-3")
	})

	t.Run("OnlyFailedOrCancelledJobsRetry", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "done"}, fsm.NewJob{Command: "running"}, fsm.NewJob{Command: "cancelling"},
			fsm.NewJob{Command: "pending"}, fsm.NewJob{Command: "blocked", DependsOn: []string{"$3"}})
		h.ok(succeed(h.claimOne("w").ID, 0))
		h.claim(fsm.Claim{WorkerID: "w", Max: 2})
		h.ok(cancel("job-3", false))
		want := map[string]store.Status{"job-1": store.StatusDone, "job-2": store.StatusRunning, "job-3": store.StatusCancelling,
			"job-4": store.StatusPending, "job-5": store.StatusBlocked}
		for id, st := range want {
			r := h.reject(retry(id), fsm.ErrConflict)
			var se *fsm.StateError
			if !errors.As(r.Err, &se) || se.Status != string(st) || se.Op != "retry" {
				t.Errorf("retry %s: err %v, want a StateError saying it is %s", id, r.Err, st)
			}
		}
		h.reject(retry("job-99"), fsm.ErrNotFound)
	})
}
