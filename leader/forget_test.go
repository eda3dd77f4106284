package leader

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// silentAfter counts a worker alive while its stored heartbeat is at most
// d old.
type silentAfter time.Duration

func (d silentAfter) Active(w *store.Worker, now time.Time) bool {
	return now.Sub(time.Unix(0, w.LastHeartbeat)) <= time.Duration(d)
}
func (silentAfter) LastSeen(w *store.Worker) time.Time { return time.Unix(0, w.LastHeartbeat) }

func TestAdmissionForgetsSilentWorkers(t *testing.T) {
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	setup := func(t *testing.T, forgetAfter time.Duration) (*env, *Admission) {
		e := newEnv(t, start)
		cfg := DefaultAdmissionConfig()
		cfg.WorkerOfflineAfter, cfg.ForgetWorkersAfter = time.Minute, forgetAfter
		cfg.Proposer, cfg.State, cfg.Liveness, cfg.Now = e, e.f, silentAfter(time.Minute), e.clock.Now
		a, err := NewAdmission(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"idle", "busy", "back"} {
			e.propose(fsm.Cmd{Op: fsm.OpRegister, Register: &fsm.Register{Worker: store.Worker{ID: id}}})
		}
		e.propose(fsm.Cmd{Op: fsm.OpSubmit, Submit: &fsm.Submit{Jobs: []fsm.NewJob{{Command: "x", MaxAttempts: 1}}}})
		e.propose(fsm.Cmd{Op: fsm.OpClaim, Claim: &fsm.Claim{WorkerID: "busy", Shell: true, LeaseTTL: int64(365 * 24 * time.Hour)}})
		return e, a
	}
	listed := func(t *testing.T, e *env) []string {
		t.Helper()
		ws, err := e.f.Workers()
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, w := range ws {
			ids = append(ids, w.ID)
		}
		return ids
	}

	t.Run("NotBeforeTheTime", func(t *testing.T) {
		e, a := setup(t, 24*time.Hour)
		e.clock.Add(23 * time.Hour)
		a.runOnce(context.Background())
		a.runOnce(context.Background())
		if got := listed(t, e); len(got) != 3 {
			t.Fatalf("before 24h: %v", got)
		}
	})
	t.Run("AfterTheTimeOnlyIdleSilentWorkersGo", func(t *testing.T) {
		e, a := setup(t, 24*time.Hour)
		e.clock.Add(25 * time.Hour)
		e.propose(fsm.Cmd{Op: fsm.OpRegister, Register: &fsm.Register{Worker: store.Worker{ID: "back"}}})
		a.runOnce(context.Background()) // busy is declared offline: its lease ends
		if got := listed(t, e); !slices.Equal(got, []string{"back", "busy"}) {
			t.Fatalf("after the first pass: %v, want back (heard from) and busy (held a lease)", got)
		}
		a.runOnce(context.Background())
		if got := listed(t, e); !slices.Equal(got, []string{"back"}) {
			t.Fatalf("after the second pass: %v, want back", got)
		}
	})
	t.Run("ZeroNeverForgets", func(t *testing.T) {
		e, a := setup(t, 0)
		e.clock.Add(365 * 24 * time.Hour)
		a.runOnce(context.Background())
		a.runOnce(context.Background())
		if got := listed(t, e); len(got) != 3 {
			t.Fatalf("forgot with ForgetWorkersAfter 0: %v", got)
		}
	})
	t.Run("NegativeIsRefused", func(t *testing.T) {
		cfg := DefaultAdmissionConfig()
		cfg.WorkerOfflineAfter, cfg.ForgetWorkersAfter = time.Minute, -time.Second
		cfg.Proposer, cfg.State, cfg.Liveness = &env{}, newEnv(t, start).f, silentAfter(0)
		if _, err := NewAdmission(cfg); err == nil {
			t.Fatal("a negative ForgetWorkersAfter was accepted")
		}
	})
}
