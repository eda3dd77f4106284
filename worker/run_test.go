package worker_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker"
)

func TestRun(t *testing.T) {
	t.Run("FailsOverFromADeadServer", func(t *testing.T) {
		f := newFakeServer(t)
		startWorker(t, testConfig(t, closedURL(t), f.URL), nil)
		rep := f.waitReport(t, f.add(wire.Job{Command: "echo ok"}))
		if rep.Kind != "done" || rep.Req.Output != "ok\n" {
			t.Fatalf("report = %+v, want done", rep)
		}
	})

	t.Run("StaleLeaseReportIsDroppedAndTheWorkerGoesOn", func(t *testing.T) {
		f := newFakeServer(t)
		// A heartbeat between steal and release would name the lease lost
		// and stop the job unreported: the report's refusal is the test.
		f.oldBeats = true
		release := make(chan struct{})
		startWorker(t, testConfig(t, f.URL), func(w *worker.Worker) {
			w.Handle("gate", func(ctx context.Context, job *worker.Job) error {
				select {
				case <-release:
				case <-ctx.Done():
				}
				return nil
			})
		})
		id := f.add(wire.Job{Type: "gate"})
		f.waitStatus(t, id, wire.StatusRunning)
		f.steal(id)
		close(release)
		waitFor(t, 5*time.Second, "the stale report", func() bool { return len(f.reportsOf(id)) > 0 })
		if reps := f.reportsOf(id); reps[0].Status != 409 {
			t.Fatalf("reports = %+v, want one answered 409", reps)
		}
		rep := f.waitReport(t, f.add(wire.Job{Command: "true"}))
		if rep.Kind != "done" {
			t.Fatalf("next job: %+v, want done", rep)
		}
		if n := len(f.reportsOf(id)); n != 1 {
			t.Fatalf("the stale report was sent %d times, want once", n)
		}
	})

	t.Run("ReportsRideOnClaimsAndGoInBatches", func(t *testing.T) {
		f := newFakeServer(t)
		cfg := testConfig(t, f.URL)
		cfg.Concurrency = 4
		startWorker(t, cfg, func(w *worker.Worker) {
			w.Handle("noop", func(context.Context, *worker.Job) error { return nil })
		})
		const n = 60
		ids := make([]string, n)
		for i := range ids {
			ids[i] = f.add(wire.Job{Type: "noop"})
		}
		for _, id := range ids {
			if rep := f.waitReport(t, id); rep.Kind != "done" || rep.Status != 200 {
				t.Fatalf("job %s: report %+v, want done answered 200", id, rep)
			}
		}
		for _, id := range ids {
			if reps := f.reportsOf(id); len(reps) != 1 {
				t.Fatalf("job %s reported %d times, want once: %+v", id, len(reps), reps)
			}
		}
		batches, carriers, carried := f.reportRequests()
		if carried == 0 {
			t.Fatalf("no report rode on a claim (%d sent in %d batches)", n, batches)
		}
		if carriers+batches >= n {
			t.Fatalf("%d reports took %d claims and %d batch requests: they were not batched", n, carriers, batches)
		}
	})

	t.Run("RefusedReportsAreSentAgain", func(t *testing.T) {
		f := newFakeServer(t)
		f.refuseReports(3)
		startWorker(t, testConfig(t, f.URL), nil)
		id := f.add(wire.Job{Command: "echo once"})
		rep := f.waitReport(t, id)
		if rep.Kind != "done" || rep.Status != 200 || rep.Req.Output != "once\n" {
			t.Fatalf("report = %+v, want done answered 200", rep)
		}
		if reps := f.reportsOf(id); len(reps) != 1 {
			t.Fatalf("reports = %+v, want one", reps)
		}
	})

	t.Run("RegistersAgainWhenTheServerForgetsIt", func(t *testing.T) {
		f := newFakeServer(t)
		cfg := testConfig(t, f.URL)
		cfg.Grace = 0
		startWorker(t, cfg, nil)
		id := f.add(wire.Job{Command: "sleep 30"})
		f.waitStatus(t, id, wire.StatusRunning)
		waitFor(t, 5*time.Second, "a heartbeat", func() bool { _, beats := f.counts(); return beats > 0 })
		f.forget(cfg.ID)
		waitFor(t, 5*time.Second, "a second registration", func() bool { regs, _ := f.counts(); return regs >= 2 })
	})

	t.Run("RunningJobFinishesWithinGrace", func(t *testing.T) {
		f := newFakeServer(t)
		r := startWorker(t, testConfig(t, f.URL), nil)
		id := f.add(wire.Job{Command: "sleep 0.3; echo finished"})
		f.waitStatus(t, id, wire.StatusRunning)
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		reps := f.reportsOf(id) // Run returned, so the report is in
		if len(reps) != 1 || reps[0].Kind != "done" || reps[0].Req.Output != "finished\n" {
			t.Fatalf("reports = %+v, want done with its output", reps)
		}
	})

	t.Run("JobLongerThanGraceIsKilledAndReported", func(t *testing.T) {
		f := newFakeServer(t)
		cfg := testConfig(t, f.URL)
		cfg.Grace = 200 * time.Millisecond
		r := startWorker(t, cfg, nil)
		id := f.add(wire.Job{Command: "trap '' TERM; sleep 30"}) // ignores SIGTERM: needs the SIGKILL
		f.waitStatus(t, id, wire.StatusRunning)
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		reps := f.reportsOf(id)
		if len(reps) != 1 || reps[0].Kind != "fail" || reps[0].Req.Error != "worker shutting down" {
			t.Fatalf("reports = %+v, want fail: worker shutting down", reps)
		}
	})

	t.Run("ShutdownAbortsTheLongPoll", func(t *testing.T) {
		f := newFakeServer(t)
		cfg := testConfig(t, f.URL)
		cfg.PollWait = time.Minute
		r := startWorker(t, cfg, nil)
		waitFor(t, 5*time.Second, "a waiting claim", func() bool { return f.waitingClaims() > 0 })
		began := time.Now()
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(began); took > 5*time.Second {
			t.Fatalf("Run took %s to return", took)
		}
	})

	t.Run("ALaterRunNumbersItsClaimsOn", func(t *testing.T) {
		f := newFakeServer(t)
		w, err := worker.New(testConfig(t, f.URL))
		if err != nil {
			t.Fatal(err)
		}
		var first []uint64
		for run := range 2 {
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			if rep := f.waitReport(t, f.add(wire.Job{Command: "true"})); rep.Kind != "done" {
				t.Fatalf("run %d: %+v", run, rep)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("run %d: %v", run, err)
			}
			if run == 0 {
				first = f.claimSeqs()
			}
		}
		all := f.claimSeqs()
		if len(first) == 0 || len(all) == len(first) {
			t.Fatalf("claims: %d in the first run, %d in all", len(first), len(all))
		}
		for i, seq := range all[len(first):] {
			if seq <= slices.Max(first) {
				t.Fatalf("the second run's claim %d has number %d, not above the first run's %v", i, seq, first)
			}
		}
	})

	t.Run("SecondRunIsRefused", func(t *testing.T) {
		f := newFakeServer(t)
		r := startWorker(t, testConfig(t, f.URL), nil)
		waitFor(t, 5*time.Second, "registration", func() bool { regs, _ := f.counts(); return regs == 1 })
		if err := r.w.Run(t.Context()); !errors.Is(err, worker.ErrAlreadyRunning) {
			t.Fatalf("second Run = %v, want ErrAlreadyRunning", err)
		}
	})
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*worker.Config)
		want   string // substring of the error; "" means valid
	}{
		{"Valid", func(c *worker.Config) {}, ""},
		{"NoServers", func(c *worker.Config) { c.Servers = nil }, "Config.Servers"},
		{"EmptyID", func(c *worker.Config) { c.ID = "" }, "Config.ID"},
		{"ZeroConcurrency", func(c *worker.Config) { c.Concurrency = 0 }, "Config.Concurrency must be between 1 and 4096"},
		{"NoQueues", func(c *worker.Config) { c.Queues = nil }, "Config.Queues"},
		{"EmptyQueue", func(c *worker.Config) { c.Queues = []string{"a", ""} }, "Config.Queues[1]"},
		{"MoreQueuesThanAClaimMayName", func(c *worker.Config) { c.Queues = make([]string, wire.MaxQueues+1) }, "Config.Queues must list at most 32"},
		{"NegativeGrace", func(c *worker.Config) { c.Grace = -time.Second }, "Config.Grace"},
		{"NegativeKillGrace", func(c *worker.Config) { c.KillGrace = -time.Second }, "Config.KillGrace"},
		{"HugeOutputTail", func(c *worker.Config) { c.OutputTail = 1 << 30 }, "Config.OutputTail"},
		{"TinyPollWait", func(c *worker.Config) { c.PollWait = time.Millisecond }, "Config.PollWait must be between 10ms and 5m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := worker.DefaultConfig()
			cfg.Servers = []string{"http://127.0.0.1:7001"}
			tt.mutate(&cfg)
			err := cfg.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestLostClaimReply checks the worker's half of giving back a job whose
// claim reply was lost: even idle, it sends a heartbeat that names the
// failed claim's number and does not list the job (issue #15, part 3).
func TestLostClaimReply(t *testing.T) {
	f := newFakeServer(t)
	startWorker(t, testConfig(t, f.URL), nil)
	// A first job teaches the worker the lease TTL, and leaves it idle.
	if rep := f.waitReport(t, f.add(wire.Job{Command: "true"})); rep.Kind != "done" {
		t.Fatalf("first job: %+v", rep)
	}
	f.loseReplies(1)
	id := f.add(wire.Job{Command: "true"})
	var seq uint64
	waitFor(t, 10*time.Second, "a heartbeat naming the lost claim", func() bool {
		lost, beats := f.lostClaims()
		if len(lost) == 0 {
			return false
		}
		seq = lost[0]
		for _, b := range beats {
			if b.ClaimsFrom != 0 && b.ClaimsFrom <= seq && seq <= b.ClaimsTo {
				for _, jl := range b.Jobs {
					if jl.JobID == id {
						t.Fatalf("the heartbeat lists the job whose reply was lost: %+v", b)
					}
				}
				return true
			}
		}
		return false
	})
	if seq == 0 {
		t.Fatal("the claim carried no claim_seq")
	}
}
