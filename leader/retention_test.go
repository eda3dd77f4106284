package leader

import (
	"context"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
)

func TestSweeperKeepsFailedJobs(t *testing.T) {
	setup := func(t *testing.T) (*env, string, string, *Sweeper) {
		e := newEnv(t, t0)
		done := e.claimOne(time.Hour, time.Minute)
		e.propose(fsm.Cmd{Op: fsm.OpReport, Report: &fsm.Report{JobID: done, Success: true, Final: true}})
		failed := e.claimOne(time.Hour, time.Minute)
		e.propose(fsm.Cmd{Op: fsm.OpReport, Report: &fsm.Report{JobID: failed, Error: "boom", Final: true}})
		cfg := DefaultSweeperConfig()
		cfg.Proposer, cfg.State, cfg.Now = e, e.f, e.clock.Now
		w, err := NewSweeper(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return e, done, failed, w
	}

	t.Run("DoneGoesAtItsRetentionFailedAfterAWeek", func(t *testing.T) {
		e, done, failed, w := setup(t)
		e.clock.Add(2 * time.Hour)
		if n := w.sweep(context.Background()); n != 2 {
			t.Fatalf("dealt with %d jobs, want both", n)
		}
		if _, err := e.f.Job(done); err == nil {
			t.Fatal("the done job is still there past its retention")
		}
		if _, err := e.f.Job(failed); err != nil {
			t.Fatalf("the failed job went before a week: %v", err)
		}
		if n := w.sweep(context.Background()); n != 0 {
			t.Fatalf("the kept job was swept again: %d", n)
		}
		e.clock.Add(DefaultKeepFailed)
		if n := w.runOnce(context.Background()); n != 1 {
			t.Fatalf("deleted %d after a week, want the failed job", n)
		}
	})

	t.Run("AClusterBeforeProtocol4DeletesNothing", func(t *testing.T) {
		e, done, _, w := setup(t)
		w.cfg.Proposer = &clusterAt{env: e, protocol: 3}
		e.clock.Add(2 * time.Hour)
		if n := w.sweep(context.Background()); n != 0 {
			t.Fatalf("dealt with %d jobs in a protocol 3 cluster", n)
		}
		if _, err := e.f.Job(done); err != nil {
			t.Fatalf("job gone: %v", err)
		}
	})

	t.Run("NoFloorKeepsThePlainDelete", func(t *testing.T) {
		e, _, failed, w := setup(t)
		w.cfg.KeepFailed = 0
		w.cfg.Proposer = &clusterAt{env: e, protocol: 3}
		e.clock.Add(2 * time.Hour)
		if n := w.runOnce(context.Background()); n != 2 {
			t.Fatalf("deleted %d, want both at their own retention", n)
		}
		if _, err := e.f.Job(failed); err == nil {
			t.Fatal("the failed job is still there")
		}
	})
}
