package fsm_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// TestAttemptOwnership checks who may act on an attempt: the token that
// claimed it, and with its lease when the claim handed one out.
func TestAttemptOwnership(t *testing.T) {
	setup := func(t *testing.T, c fsm.Claim) (*harness, *store.Job) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x", MaxAttempts: 3})
		jobs := h.claim(c)
		if len(jobs) != 1 {
			t.Fatalf("claim got %d jobs", len(jobs))
		}
		return h, jobs[0]
	}
	leased := fsm.Claim{WorkerID: "w1", Token: "fleet1", Fenced: true, Seq: 7}

	t.Run("TheClaimRecordsWhoAndHow", func(t *testing.T) {
		h, j := setup(t, leased)
		got := h.job(j.ID)
		if got.ClaimToken != "fleet1" || !got.Fenced || got.ClaimSeq != 7 {
			t.Fatalf("claimed job: token %q fenced %v seq %d", got.ClaimToken, got.Fenced, got.ClaimSeq)
		}
		// The record keeps it through a snapshot.
		g := snapshotRestore(t, h.f)
		if r, err := g.Job(j.ID); err != nil || !reflect.DeepEqual(r, got) {
			t.Fatalf("restored %+v, %v; want %+v", r, err, got)
		}
	})

	t.Run("AnotherTokenCannotEndOrRenewTheAttempt", func(t *testing.T) {
		h, j := setup(t, leased)
		h.at(time.Second)
		h.reject(report(fsm.Report{JobID: j.ID, Lease: j.Lease, Success: true, Output: "forged", Token: "fleet2"}), fsm.ErrForbidden)
		h.reject(report(fsm.Report{JobID: j.ID, Lease: j.Lease, Final: true, Token: "fleet2"}), fsm.ErrForbidden)
		h.reject(report(fsm.Report{JobID: j.ID, Token: "fleet2"}), fsm.ErrForbidden)
		h.reject(fsm.Cmd{Op: fsm.OpHeartbeat, Heartbeat: &fsm.Heartbeat{JobID: j.ID, Lease: j.Lease, LeaseTTL: int64(ttl), Token: "fleet2"}}, fsm.ErrForbidden)

		r := h.ok(report(fsm.Report{JobID: j.ID, Lease: j.Lease, Success: true, Output: "real", Token: "fleet1"}))
		if got := r.Jobs[0]; got.Status != store.StatusDone || got.Output != "real" {
			t.Fatalf("the claimer's report: %s %q", got.Status, got.Output)
		}
	})

	t.Run("ARetriedReportIsAnsweredOnlyToTheClaimer", func(t *testing.T) {
		h, j := setup(t, leased)
		h.ok(report(fsm.Report{JobID: j.ID, Lease: j.Lease, Success: true, Output: "real", Token: "fleet1"}))
		if r := h.ok(report(fsm.Report{JobID: j.ID, Lease: j.Lease, Success: true, Token: "fleet1"})); r.Jobs[0].Output != "real" {
			t.Fatalf("the claimer's retry got %+v", r.Jobs[0])
		}
		h.reject(report(fsm.Report{JobID: j.ID, Lease: j.Lease, Success: true, Token: "fleet2"}), fsm.ErrStaleLease)
	})

	t.Run("AnAttemptClaimedWithALeaseNeedsIt", func(t *testing.T) {
		h, j := setup(t, leased)
		h.reject(report(fsm.Report{JobID: j.ID, Success: true, Token: "fleet1"}), fsm.ErrLeaseRequired)
		h.reject(report(fsm.Report{JobID: j.ID, Final: true, Token: "fleet1"}), fsm.ErrLeaseRequired)
		h.reject(heartbeat(j.ID, 0, ttl), fsm.ErrLeaseRequired)
		h.ok(heartbeat(j.ID, j.Lease, ttl))
	})

	t.Run("WithAuthOffOnlyTheLeaseRuleApplies", func(t *testing.T) {
		h, j := setup(t, fsm.Claim{WorkerID: "w1", Fenced: true})
		h.reject(succeed(j.ID, 0), fsm.ErrLeaseRequired)
		h.ok(report(fsm.Report{JobID: j.ID, Lease: j.Lease, Success: true}))
	})

	t.Run("ASeedClaimTakesReportsWithoutALease", func(t *testing.T) {
		h, j := setup(t, fsm.Claim{WorkerID: "w1", Token: "fleet1"})
		h.ok(heartbeat(j.ID, 0, ttl))
		h.ok(fsm.Cmd{Op: fsm.OpHeartbeat, Heartbeat: &fsm.Heartbeat{JobID: j.ID, LeaseTTL: int64(ttl), Token: "fleet1"}})
		h.reject(report(fsm.Report{JobID: j.ID, Success: true, Token: "fleet2"}), fsm.ErrForbidden)
		if r := h.ok(report(fsm.Report{JobID: j.ID, Success: true, Token: "fleet1"})); r.Jobs[0].Status != store.StatusDone {
			t.Fatalf("seed report: %s", r.Jobs[0].Status)
		}
	})

	t.Run("ClaimsFromBeforeTheFenceKeepTheSeedRules", func(t *testing.T) {
		// A job claimed by a command without the new fields (an older
		// leader, or the fence turned off) records nobody: any token
		// may end it, without a lease, as before.
		h, j := setup(t, fsm.Claim{WorkerID: "w1"})
		if got := h.job(j.ID); got.ClaimToken != "" || got.Fenced || got.ClaimSeq != 0 {
			t.Fatalf("claim without the fields recorded %q %v %d", got.ClaimToken, got.Fenced, got.ClaimSeq)
		}
		h.ok(report(fsm.Report{JobID: j.ID, Success: true, Token: "fleet2"}))
	})
}

// TestWorkerOwnership checks that a worker id is the token's that
// registered it while the worker is active.
func TestWorkerOwnership(t *testing.T) {
	reg := func(id, token string, vram int) fsm.Cmd {
		return fsm.Cmd{Op: fsm.OpRegister, Register: &fsm.Register{Worker: store.Worker{ID: id, VRAMMB: vram}, Token: token}}
	}
	whb := func(id, token string) fsm.Cmd {
		return fsm.Cmd{Op: fsm.OpWorkerHeartbeat, WorkerHeartbeat: &fsm.WorkerHeartbeat{WorkerID: id, LeaseTTL: int64(ttl), Token: token}}
	}
	worker := func(h *harness, id string) *store.Worker {
		t.Helper()
		w, err := h.f.Worker(id)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}

	t.Run("AnotherTokenCannotRegisterHeartbeatOrClaimAsIt", func(t *testing.T) {
		h := setup(t)
		h.ok(reg("w1", "fleet1", 100))
		h.submit(fsm.NewJob{Command: "x"})
		j := h.claim(fsm.Claim{WorkerID: "w1", Token: "fleet1", Fenced: true})[0]
		before := worker(h, "w1")

		h.at(8 * time.Second)
		h.reject(reg("w1", "fleet2", 999), fsm.ErrForbidden)
		h.reject(whb("w1", "fleet2"), fsm.ErrForbidden)
		h.submit(fsm.NewJob{Command: "y"})
		h.reject(claimCmd(fsm.Claim{WorkerID: "w1", Token: "fleet2", LeaseTTL: int64(ttl)}), fsm.ErrForbidden)
		if after := worker(h, "w1"); !reflect.DeepEqual(after, before) {
			t.Fatalf("refused calls changed the worker: %+v, was %+v", after, before)
		}
		if got := h.job(j.ID).LeaseDeadline; got != ns(t0.Add(ttl)) {
			t.Fatalf("another token's heartbeat renewed w1's lease: deadline %d", got)
		}

		r := h.ok(whb("w1", "fleet1"))
		if r.Renewed != 1 {
			t.Fatalf("the owner's heartbeat renewed %d leases, want 1", r.Renewed)
		}
		h.ok(reg("w1", "fleet1", 200))
		if w := worker(h, "w1"); w.VRAMMB != 200 || w.Owner != "fleet1" {
			t.Fatalf("the owner's register: %+v", w)
		}
	})

	t.Run("AnOfflineWorkersIDCanBeTakenOver", func(t *testing.T) {
		h := setup(t)
		h.ok(reg("w1", "fleet1", 100))
		h.at(time.Minute)
		h.ok(workerOffline("w1", ns(t0)))
		h.ok(reg("w1", "fleet2", 50))
		if w := worker(h, "w1"); w.Owner != "fleet2" || w.VRAMMB != 50 {
			t.Fatalf("after the takeover: %+v", w)
		}
		h.reject(whb("w1", "fleet1"), fsm.ErrForbidden)
	})

	t.Run("AClaimRegistersTheIDForItsToken", func(t *testing.T) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x"}, fsm.NewJob{Command: "y"})
		h.claim(fsm.Claim{WorkerID: "w9", Token: "fleet1", Fenced: true})
		if w := worker(h, "w9"); w.Owner != "fleet1" {
			t.Fatalf("owner %q, want fleet1", w.Owner)
		}
		h.reject(reg("w9", "fleet2", 1), fsm.ErrForbidden)
	})

	t.Run("WithAuthOffAnyCallerMay", func(t *testing.T) {
		h := setup(t)
		h.ok(reg("w1", "fleet1", 100))
		h.ok(whb("w1", ""))
		h.ok(reg("w1", "", 300))
		if w := worker(h, "w1"); w.Owner != "fleet1" || w.VRAMMB != 300 {
			t.Fatalf("a register without a token: %+v", w)
		}
	})
}

// TestLostClaim checks that an attempt whose claim reply never reached its
// worker goes back to pending as soon as the worker's heartbeat shows it,
// without counting.
func TestLostClaim(t *testing.T) {
	listed := func(worker string, from, to uint64, leases ...fsm.LeaseRef) fsm.Cmd {
		return fsm.Cmd{Op: fsm.OpWorkerHeartbeat, WorkerHeartbeat: &fsm.WorkerHeartbeat{
			WorkerID: worker, LeaseTTL: int64(ttl), Listed: true, Leases: leases, ClaimsFrom: from, ClaimsTo: to}}
	}
	setup := func(t *testing.T) (*harness, *store.Job) {
		h := setup(t)
		h.submit(fsm.NewJob{Command: "x", MaxAttempts: 1})
		j := h.claim(fsm.Claim{WorkerID: "w1", Fenced: true, Seq: 105})[0]
		return h, j
	}

	t.Run("GivenBackAtOnceWithoutCountingAnAttempt", func(t *testing.T) {
		h, j := setup(t)
		h.at(time.Second)
		r := h.ok(listed("w1", 100, 105))
		got := h.job(j.ID)
		if got.Status != store.StatusPending || got.Attempts != 0 || got.RunAt > ns(h.now) || got.LeaseDeadline != 0 {
			t.Fatalf("after the heartbeat: %s attempts %d run at %d deadline %d", got.Status, got.Attempts, got.RunAt, got.LeaseDeadline)
		}
		want := store.Attempt{Attempt: 1, WorkerID: "w1", Lease: j.Lease, Status: store.StatusReturned,
			Error: "claim reply lost: worker w1 never received it", Started: ns(t0), Ended: ns(h.now)}
		if len(got.History) != 1 || !reflect.DeepEqual(got.History[0], want) {
			t.Fatalf("history %+v, want [%+v]", got.History, want)
		}
		if len(r.Jobs) != 1 || r.Jobs[0].ID != j.ID {
			t.Fatalf("heartbeat result jobs %v, want the given-back job", jobIDs(r.Jobs))
		}
		checkIndexes(t, h.f)
		// Its lease is dead; the one attempt max_attempts allows is
		// still there for the next claim, which runs it.
		h.reject(report(fsm.Report{JobID: j.ID, Lease: j.Lease, Success: true}), fsm.ErrStaleLease)
		h.reject(report(fsm.Report{JobID: j.ID, Lease: j.Lease, Error: "x"}), fsm.ErrStaleLease)
		k := h.claimOne("w2")
		if k.ID != j.ID || k.Attempts != 1 || k.Lease <= j.Lease {
			t.Fatalf("reclaimed %s attempt %d lease %d", k.ID, k.Attempts, k.Lease)
		}
		h.ok(succeed(k.ID, k.Lease))
		h.status(store.StatusDone, j.ID)
		snapshotRestore(t, h.f)
	})

	t.Run("AClaimStillInFlightIsNotJudged", func(t *testing.T) {
		// The worker sent the heartbeat before claim 105 ended: the
		// reply may still be on its way.
		h, j := setup(t)
		h.at(time.Second)
		h.ok(listed("w1", 100, 104))
		if got := h.job(j.ID); got.Status != store.StatusRunning || got.LeaseDeadline != ns(t0.Add(ttl)) {
			t.Fatalf("after the heartbeat: %s deadline %d, want running, not renewed", got.Status, got.LeaseDeadline)
		}
	})

	t.Run("AnEarlierRunsAttemptExpiresAsBefore", func(t *testing.T) {
		// Claims before ClaimsFrom were a previous run's, which may
		// have received and run them.
		h, j := setup(t)
		h.ok(listed("w1", 106, 110))
		h.status(store.StatusRunning, j.ID)
	})

	t.Run("AListedAttemptIsRenewed", func(t *testing.T) {
		h, j := setup(t)
		h.at(time.Second)
		if r := h.ok(listed("w1", 100, 105, fsm.LeaseRef{JobID: j.ID, Lease: j.Lease})); r.Renewed != 1 {
			t.Fatalf("renewed %d", r.Renewed)
		}
		h.status(store.StatusRunning, j.ID)
	})

	t.Run("WithoutARangeItExpiresAsBefore", func(t *testing.T) {
		h, j := setup(t)
		h.ok(listed("w1", 0, 0))
		h.status(store.StatusRunning, j.ID)
	})

	t.Run("ACancellingJobIsLeftToItsCancel", func(t *testing.T) {
		h, j := setup(t)
		h.ok(cancel(j.ID, false))
		h.ok(listed("w1", 100, 105))
		h.status(store.StatusCancelling, j.ID)
	})
}

// TestGangCallsOwnership checks that only the token that claimed a gang
// task may checkpoint it or acknowledge its preemption.
func TestGangCallsOwnership(t *testing.T) {
	h := setupGangs(t)
	for _, w := range []string{"w1", "w2"} {
		h.gpu(w, 8000, "gpu")
	}
	id, _ := h.gang(2, gpuJob)
	h.ok(reserveGang(id, h.gangOf(id).Epoch, "w1", "w2"))
	var run []*store.Job
	for _, w := range []string{"w1", "w2"} {
		run = append(run, h.claim(fsm.Claim{WorkerID: w, Max: 1, Shell: true, Token: "fleet1", Fenced: true})...)
	}
	h.at(time.Second)
	h.ok(report(fsm.Report{JobID: run[1].ID, Lease: run[1].Lease, Error: "segfault", Token: "fleet1"}))
	epoch := h.gangOf(id).Epoch
	as := func(c fsm.Cmd, token string) fsm.Cmd {
		switch {
		case c.Checkpoint != nil:
			c.Checkpoint.Token = token
		case c.Preempted != nil:
			c.Preempted.Token = token
		}
		return c
	}
	h.reject(as(checkpoint(run[0].ID, epoch, []byte("forged")), "fleet2"), fsm.ErrForbidden)
	if _, _, err := h.f.Checkpoint(run[0].ID); err == nil {
		t.Fatal("another token's checkpoint was kept")
	}
	h.reject(as(preempted(run[0].ID, epoch), "fleet2"), fsm.ErrForbidden)
	h.ok(as(checkpoint(run[0].ID, epoch, []byte("step 1")), "fleet1"))
	h.ok(as(preempted(run[0].ID, epoch), "fleet1"))
}

// TestFenceEncoding checks that the fields of ProtocolFence change a
// command's bytes only when they are set: a command without them is
// written as before, so that a node that predates them reads it.
func TestFenceEncoding(t *testing.T) {
	plain := []fsm.Cmd{
		claimCmd(fsm.Claim{WorkerID: "w", LeaseTTL: 5}),
		heartbeat("j", 3, ttl),
		workerHeartbeat("w", ttl),
		report(fsm.Report{JobID: "j", Lease: 3, Success: true}),
		register(store.Worker{ID: "w"}),
		checkpoint("j", 2, []byte("x")),
		preempted("j", 2),
	}
	fenced := []fsm.Cmd{
		claimCmd(fsm.Claim{WorkerID: "w", LeaseTTL: 5, Seq: 1}),
		{Op: fsm.OpHeartbeat, Heartbeat: &fsm.Heartbeat{JobID: "j", Lease: 3, LeaseTTL: int64(ttl), Token: "t"}},
		{Op: fsm.OpWorkerHeartbeat, WorkerHeartbeat: &fsm.WorkerHeartbeat{WorkerID: "w", LeaseTTL: int64(ttl), ClaimsTo: 1}},
		report(fsm.Report{JobID: "j", Lease: 3, Success: true, Token: "t"}),
		{Op: fsm.OpRegister, Register: &fsm.Register{Worker: store.Worker{ID: "w"}, Token: "t"}},
		{Op: fsm.OpCheckpoint, Checkpoint: &fsm.Checkpoint{JobID: "j", Epoch: 2, Data: []byte("x"), Token: "t"}},
		{Op: fsm.OpPreempted, Preempted: &fsm.Preempted{JobID: "j", Epoch: 2, Token: "t"}},
	}
	// An entry of one command: version, Now (0, one byte), count (one
	// byte), then the op code.
	opCode := func(c fsm.Cmd) byte { return mustEncode(t, &fsm.Entry{Cmds: []fsm.Cmd{c}})[3] }
	want := map[fsm.Op][2]byte{ // op code without the fields, and with them
		fsm.OpClaim: {2, 7}, fsm.OpHeartbeat: {3, 8}, fsm.OpWorkerHeartbeat: {4, 9}, fsm.OpReport: {5, 10},
		fsm.OpRegister: {0, 0}, fsm.OpCheckpoint: {0, 0}, fsm.OpPreempted: {0, 0},
	}
	for i := range plain {
		p, f := plain[i], fenced[i]
		if got := [2]byte{opCode(p), opCode(f)}; got != want[p.Op] {
			t.Errorf("%s: op codes %v, want %v", p.Op, got, want[p.Op])
		}
		pb, fb := mustEncode(t, &fsm.Entry{Cmds: []fsm.Cmd{p}}), mustEncode(t, &fsm.Entry{Cmds: []fsm.Cmd{f}})
		for _, b := range [][]byte{pb, fb} {
			e := mustDecode(t, b)
			if got := e.Cmds[0].Op; got != p.Op {
				t.Errorf("%s read back as %s", p.Op, got)
			}
		}
		if p.Op == fsm.OpRegister || p.Op == fsm.OpCheckpoint || p.Op == fsm.OpPreempted {
			// A JSON op with a token goes under a name older nodes
			// refuse, rather than one whose field they would drop.
			if strings.Contains(string(pb), "_fence") || !strings.Contains(string(fb), `"`+string(p.Op)+`_fence"`) {
				t.Errorf("%s: without token %q, with %q", p.Op, pb, fb)
			}
		}
	}
	// A fenced JSON op name without its token is not a command.
	bad := mustEncode(t, &fsm.Entry{Cmds: []fsm.Cmd{fenced[4]}})
	bad = []byte(strings.Replace(string(bad), `"token":"t"`, `"xoken":"t"`, 1)) // the same length
	if _, err := fsm.Decode(bad); err == nil || !strings.Contains(err.Error(), "without its token") {
		t.Errorf("decoded register_fence without a token: %v", err)
	}
}
