package leader

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// claimOne submits a job with the given retention and leases it to worker
// "w" for ttl; it returns the job's id.
func (e *env) claimOne(retention, ttl time.Duration) string {
	e.t.Helper()
	e.propose(fsm.Cmd{Op: fsm.OpSubmit, Submit: &fsm.Submit{Jobs: []fsm.NewJob{{Command: "x", Queue: "default", MaxAttempts: 1, Retention: int64(retention)}}}})
	res := e.propose(fsm.Cmd{Op: fsm.OpClaim, Claim: &fsm.Claim{WorkerID: "w", Shell: true, Max: 1, LeaseTTL: int64(ttl)}})
	if len(res.Jobs) != 1 {
		e.t.Fatalf("claimed %d jobs, want 1", len(res.Jobs))
	}
	return res.Jobs[0].ID
}

func (e *env) reaper(since time.Time) *Reaper {
	e.t.Helper()
	cfg := DefaultReaperConfig()
	cfg.LeaseTTL = time.Hour
	cfg.Proposer, cfg.State, cfg.Recorder, cfg.Now = e, e.f, e.rec, e.clock.Now
	r, err := NewReaper(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	r.since = since
	return r
}

func TestReaper(t *testing.T) {
	t.Run("ExpiresLeasesPastTheirDeadline", func(t *testing.T) {
		e := newEnv(t, t0)
		id := e.claimOne(0, time.Minute)
		r := e.reaper(time.Time{})
		if n := r.runOnce(context.Background()); n != 0 {
			t.Fatalf("expired %d leases before their deadline", n)
		}
		e.clock.Add(2 * time.Minute)
		if n := r.runOnce(context.Background()); n != 1 || e.rec.expiredEnding != 1 {
			t.Fatalf("expired %d (recorded %d), want 1", n, e.rec.expiredEnding)
		}
		if j, err := e.f.Job(id); err != nil || j.Status == store.StatusRunning {
			t.Fatalf("job after its lease expired: %+v, %v", j, err)
		}
	})

	t.Run("AnUnacknowledgedAttemptGoesBackUncounted", func(t *testing.T) {
		// A worker froze before its first heartbeat: its attempt does not
		// count, and the job of max_attempts 1 waits for another worker.
		e := newEnv(t, t0)
		e.propose(fsm.Cmd{Op: fsm.OpSubmit, Submit: &fsm.Submit{Jobs: []fsm.NewJob{{Command: "x", Queue: "default", MaxAttempts: 1}}}})
		claim := func(worker string) *store.Job {
			res := e.propose(fsm.Cmd{Op: fsm.OpClaim, Claim: &fsm.Claim{WorkerID: worker, Shell: true, Max: 1, LeaseTTL: int64(time.Minute), Ack: true}})
			if len(res.Jobs) != 1 {
				t.Fatalf("%s claimed %d jobs, want 1", worker, len(res.Jobs))
			}
			return res.Jobs[0]
		}
		frozen := claim("frozen")
		r := e.reaper(time.Time{})
		e.clock.Add(2 * time.Minute)
		if n := r.runOnce(context.Background()); n != 1 || e.rec.expiredEnding != 1 {
			t.Fatalf("expired %d (recorded %d), want 1", n, e.rec.expiredEnding)
		}
		if j, err := e.f.Job(frozen.ID); err != nil || j.Status != store.StatusPending || j.Attempts != 0 {
			t.Fatalf("job after its unacknowledged lease expired: %+v, %v; want pending with no attempt counted", j, err)
		}
		// The next worker acknowledges its attempt; that one counts.
		next := claim("alive")
		e.propose(fsm.Cmd{Op: fsm.OpHeartbeat, Heartbeat: &fsm.Heartbeat{JobID: next.ID, Lease: next.Lease, LeaseTTL: int64(time.Minute)}})
		e.clock.Add(2 * time.Minute)
		if n := r.runOnce(context.Background()); n != 1 {
			t.Fatalf("expired %d, want 1", n)
		}
		if j, err := e.f.Job(next.ID); err != nil || j.Status != store.StatusFailed || j.Attempts != 1 {
			t.Fatalf("job after its acknowledged lease expired: %+v, %v; want failed on its one attempt", j, err)
		}
	})

	t.Run("NewLeaderWaitsOneLeaseTTL", func(t *testing.T) {
		e := newEnv(t, t0)
		e.claimOne(0, time.Minute)
		e.clock.Add(2 * time.Minute)
		r := e.reaper(time.Now()) // leadership began just now; LeaseTTL is 1h
		if n := r.runOnce(context.Background()); n != 0 || e.proposals() != 2 {
			t.Fatalf("a new leader expired %d leases (%d proposals) within its first lease period", n, e.proposals())
		}
	})
}

func TestSweeper(t *testing.T) {
	e := newEnv(t, t0)
	id := e.claimOne(time.Hour, time.Minute)
	e.propose(fsm.Cmd{Op: fsm.OpReport, Report: &fsm.Report{JobID: id, Success: true, Final: true}})
	cfg := DefaultSweeperConfig()
	cfg.Proposer, cfg.State, cfg.Now = e, e.f, e.clock.Now
	w, err := NewSweeper(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n := w.runOnce(context.Background()); n != 0 {
		t.Fatalf("deleted %d jobs within their retention", n)
	}
	e.clock.Add(2 * time.Hour)
	if n := w.runOnce(context.Background()); n != 1 {
		t.Fatalf("deleted %d jobs past their retention, want 1", n)
	}
	if _, err := e.f.Job(id); err == nil {
		t.Fatal("the job is still there")
	}
}

func TestLoopLife(t *testing.T) {
	t.Run("StopIsSafeTwiceAndBeforeStart", func(t *testing.T) {
		var runs atomic.Int32
		var r runner
		r.stop()
		r.start(context.Background(), func(ctx context.Context) { runs.Add(1); <-ctx.Done() })
		if runs.Load() != 0 {
			t.Fatal("a loop stopped before it started ran")
		}
		var r2 runner
		r2.start(context.Background(), func(ctx context.Context) { runs.Add(1); <-ctx.Done() })
		r2.start(context.Background(), func(ctx context.Context) { runs.Add(1); <-ctx.Done() })
		r2.stop()
		r2.stop()
		if runs.Load() != 1 {
			t.Fatalf("started twice: %d runs, want 1", runs.Load())
		}
	})

	t.Run("ALoopEndsWithItsContext", func(t *testing.T) {
		e := newEnv(t, t0)
		r := e.reaper(time.Time{})
		ctx, cancel := context.WithCancel(context.Background())
		r.Start(ctx)
		cancel()
		r.Stop() // returns only once the loop returned; goleak checks the rest
	})
}

// TestLeadership checks the one place the loops start and stop: Establish
// first, then every loop, all stopped when the term's context ends.
func TestLeadership(t *testing.T) {
	e := newEnv(t, t0)
	e.create(fsm.PutSchedule{Name: "m", Cron: "@every 1m"})
	e.clock.Add(time.Minute + time.Second)
	var established atomic.Bool
	cfg := DefaultConfig()
	cfg.Proposer, cfg.State, cfg.Recorder, cfg.Liveness, cfg.Now = e, e.f, e.rec, everyoneActive{}, e.clock.Now
	cfg.Bulker.Compile = statusOnly
	cfg.Establish = func(context.Context) {
		if e.proposals() != 1 {
			t.Errorf("Establish ran after %d proposals, want it before any loop's", e.proposals()-1)
		}
		established.Store(true)
	}
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	// The scheduler's first pass is at once: the due tick fires.
	deadline := time.Now().Add(5 * time.Second)
	for len(e.ticks("m")) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if len(e.ticks("m")) != 1 || !established.Load() {
		t.Fatalf("after gaining leadership: %d ticks fired, established %v", len(e.ticks("m")), established.Load())
	}
	cancel()
	<-done // Run returns once every loop stopped; goleak checks none is left
	n := e.proposals()
	e.clock.Add(time.Hour)
	time.Sleep(20 * time.Millisecond)
	if e.proposals() != n {
		t.Fatal("a loop proposed after leadership was lost")
	}

	t.Run("WorkerOfflineAfterDefaultsToThreeLeaseTTLs", func(t *testing.T) {
		c := cfg
		c.Reaper.LeaseTTL, c.Admission.WorkerOfflineAfter = time.Minute, 0
		loops, err := c.loops(time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if got := loops[3].(*Admission).cfg.WorkerOfflineAfter; got != 3*time.Minute {
			t.Fatalf("WorkerOfflineAfter %s, want 3m", got)
		}
	})

	t.Run("ConfigNamesWhatIsMissing", func(t *testing.T) {
		bad := DefaultConfig()
		if _, err := New(bad); err == nil {
			t.Fatal("a Config without dependencies was accepted")
		}
		bad = cfg
		bad.Scheduler.MaxCatchup = 0
		if _, err := New(bad); err == nil {
			t.Fatal("a Config with Scheduler.MaxCatchup 0 was accepted")
		}
	})
}
