package fsm_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

func submitGang(size int, nj fsm.NewJob) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpSubmitGang, SubmitGang: &fsm.SubmitGang{Size: size, Job: nj}}
}

func reserveGang(id string, epoch uint64, workers ...string) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpReserveGang, ReserveGang: &fsm.ReserveGang{GangID: id, Epoch: epoch, Workers: workers}}
}

func unreserveGang(id string, epoch uint64) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpUnreserveGang, Gang: &fsm.GangRef{GangID: id, Epoch: epoch}}
}

func forceDrain(id string, epoch uint64) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpForceDrain, Gang: &fsm.GangRef{GangID: id, Epoch: epoch}}
}

func preempted(job string, epoch uint64) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpPreempted, Preempted: &fsm.Preempted{JobID: job, Epoch: epoch}}
}

func checkpoint(job string, epoch uint64, data []byte) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpCheckpoint, Checkpoint: &fsm.Checkpoint{JobID: job, Epoch: epoch, Data: data}}
}

func workerOffline(worker string, seenAt int64) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpWorkerOffline, WorkerOffline: &fsm.WorkerOffline{WorkerID: worker, SeenAt: seenAt}}
}

// gpu registers a worker offering vram MB of VRAM, 4 slots and tags.
func (h *harness) gpu(id string, vram int, tags ...string) {
	h.t.Helper()
	h.ok(register(store.Worker{ID: id, ExecAddr: id + ":9000", VRAMMB: vram, MemoryMB: 65536, Slots: 4, Tags: tags}))
}

// gang submits a gang and returns its id and tasks.
func (h *harness) gang(size int, nj fsm.NewJob) (string, []*store.Job) {
	h.t.Helper()
	r := h.ok(submitGang(size, nj))
	if r.Gang == nil || len(r.Jobs) != size {
		h.t.Fatalf("gang submit = %+v", r)
	}
	return r.Gang.ID, r.Jobs
}

func (h *harness) gangOf(id string) *store.Gang {
	h.t.Helper()
	g, _, err := h.f.Gang(id)
	if err != nil {
		h.t.Fatalf("gang %s: %v", id, err)
	}
	return g
}

// claimAs has worker claim up to max jobs from the default queue.
func (h *harness) claimAs(worker string, max int) []*store.Job {
	h.t.Helper()
	return h.claim(fsm.Claim{WorkerID: worker, Max: max, Shell: true})
}

// runGang places a gang on workers (one task each, in index order) and has
// each worker claim its task; it returns the claimed tasks by index.
func (h *harness) runGang(id string, workers ...string) []*store.Job {
	h.t.Helper()
	h.ok(reserveGang(id, h.gangOf(id).Epoch, workers...))
	out := make([]*store.Job, len(workers))
	for i, w := range workers {
		got := h.claimAs(w, 1)
		if len(got) != 1 || got[0].GangIndex != i {
			h.t.Fatalf("worker %s claimed %v, want task %d of %s", w, jobIDs(got), i, id)
		}
		out[i] = got[0]
	}
	if st := h.gangOf(id).Status; st != store.GangRunning {
		h.t.Fatalf("gang %s is %s after every task was claimed, want running", id, st)
	}
	return out
}

// checkUsage compares the capacity index with the stored running, cancelling
// and reserved jobs.
func checkUsage(t *testing.T, f *fsm.FSM) {
	t.Helper()
	want := make(map[string]store.Resources)
	for _, j := range allJobs(t, f) {
		if (j.Status.Leased() || j.Status == store.StatusReserved) && !j.Resources.IsZero() {
			want[j.WorkerID] = want[j.WorkerID].Add(j.Resources, 1)
		}
	}
	if got := f.WorkerUsage(); !reflect.DeepEqual(got, want) {
		t.Errorf("capacity index %v, stored jobs hold %v", got, want)
	}
}

func setupGangs(t *testing.T) *harness {
	h := setup(t)
	t.Cleanup(func() { checkUsage(t, h.f) })
	return h
}

var gpuJob = fsm.NewJob{Command: "train", MaxAttempts: 3, Resources: store.Resources{VRAMMB: 8000}, Tags: []string{"gpu"},
	Backoff: store.Backoff{Base: int64(time.Second)}}

func TestPlacement(t *testing.T) {
	t.Run("ClaimPassesOverJobsThatDoNotFit", func(t *testing.T) {
		h := setupGangs(t)
		h.gpu("w1", 8000, "gpu")
		big := h.submit(fsm.NewJob{Command: "big", Resources: store.Resources{VRAMMB: 16000}})[0]
		tpu := h.submit(fsm.NewJob{Command: "tpu", Tags: []string{"tpu"}})[0]
		fits := h.submit(fsm.NewJob{Command: "fits", Resources: store.Resources{VRAMMB: 6000}, Tags: []string{"gpu"}})[0]
		second := h.submit(fsm.NewJob{Command: "second", Resources: store.Resources{VRAMMB: 6000}})[0]
		plain := h.submit(fsm.NewJob{Command: "plain"})[0]
		got := h.claimAs("w1", 10)
		if ids := jobIDs(got); !slices.Equal(ids, []string{fits.ID, plain.ID}) {
			t.Fatalf("claimed %v, want %s (fits) then %s (asks for nothing); the rest does not fit 8000 MB", ids, fits.ID, plain.ID)
		}
		h.status(store.StatusPending, big.ID, tpu.ID, second.ID)
		if h.f.ClaimableBy("w1", nil, nil, true, ns(h.now)) {
			t.Error("ClaimableBy(w1) is true although nothing left fits w1")
		}
		h.ok(succeed(fits.ID, 0))
		if got := h.claimAs("w1", 10); !slices.Equal(jobIDs(got), []string{second.ID}) {
			t.Fatalf("after the 6000 MB job ended, w1 claimed %v, want %s", jobIDs(got), second.ID)
		}
	})

	t.Run("FreedCapacityWakesLongPolls", func(t *testing.T) {
		h := setupGangs(t)
		h.gpu("w1", 8000)
		a := h.submit(fsm.NewJob{Command: "a", Resources: store.Resources{VRAMMB: 8000}})[0]
		h.submit(fsm.NewJob{Command: "b", Resources: store.Resources{VRAMMB: 8000}})
		h.claimAs("w1", 1)
		ch := h.f.Changed()
		h.ok(heartbeat(a.ID, 0, ttl))
		if closed(ch) {
			t.Error("a heartbeat woke the long-polls")
		}
		h.ok(succeed(a.ID, 0))
		if !closed(ch) {
			t.Error("the end of an 8000 MB job did not wake the long-polls")
		}
	})

	t.Run("CapacityCountsRunningAndReservedJobs", func(t *testing.T) {
		h := setupGangs(t)
		h.gpu("w1", 20000, "gpu")
		h.gpu("w2", 20000, "gpu")
		run := h.submit(fsm.NewJob{Command: "run", Resources: store.Resources{VRAMMB: 8000}})[0]
		h.claimAs("w1", 1)
		g1, _ := h.gang(1, gpuJob)
		h.ok(reserveGang(g1, 0, "w1"))
		want := map[string]store.Resources{"w1": {VRAMMB: 16000}}
		if got := h.f.WorkerUsage(); !reflect.DeepEqual(got, want) {
			t.Fatalf("usage %v, want %v", got, want)
		}
		g2, _ := h.gang(1, gpuJob)
		r := h.reject(reserveGang(g2, 0, "w1"), fsm.ErrConflict)
		if !strings.Contains(r.Err.Error(), "does not fit") {
			t.Errorf("err = %v", r.Err)
		}
		h.ok(reserveGang(g2, 0, "w2"))
		h.ok(succeed(run.ID, 0))
		g3, _ := h.gang(1, gpuJob)
		h.ok(reserveGang(g3, 0, "w1")) // 8000 of the reserved task + 8000 now fit
		want = map[string]store.Resources{"w1": {VRAMMB: 16000}, "w2": {VRAMMB: 8000}}
		if got := h.f.WorkerUsage(); !reflect.DeepEqual(got, want) {
			t.Fatalf("usage %v, want %v", got, want)
		}
	})

	t.Run("TagsMustAllBeOffered", func(t *testing.T) {
		h := setupGangs(t)
		h.gpu("w1", 80000, "gpu")
		h.gpu("w2", 80000, "gpu", "a100")
		id, _ := h.gang(1, fsm.NewJob{Command: "x", Tags: []string{"gpu", "a100"}})
		h.reject(reserveGang(id, 0, "w1"), fsm.ErrConflict)
		h.ok(reserveGang(id, 0, "w2"))
	})

	t.Run("ReservedTasksGoOnlyToTheirWorkerWithTheGangsEnv", func(t *testing.T) {
		h := setupGangs(t)
		for _, w := range []string{"w1", "w2", "w3", "w4"} {
			h.gpu(w, 8000, "gpu")
		}
		id, tasks := h.gang(3, gpuJob)
		h.ok(reserveGang(id, 0, "w3", "w1", "w2"))
		h.status(store.StatusReserved, jobIDs(tasks)...)
		if got := h.claimAs("w4", 4); len(got) != 0 {
			t.Fatalf("w4 claimed %v, reserved for others", jobIDs(got))
		}
		if !h.f.ClaimableBy("w1", []string{"elsewhere"}, nil, true, ns(h.now)) {
			t.Error("ClaimableBy(w1) is false with a task reserved for it")
		}
		got := h.claim(fsm.Claim{WorkerID: "w1", Queues: []string{"elsewhere"}, Shell: true})
		if len(got) != 1 || got[0].ID != tasks[1].ID {
			t.Fatalf("w1 claimed %v, want its reserved %s whatever queues it asks for", jobIDs(got), tasks[1].ID)
		}
		env := got[0].Env
		want := map[string]string{"GANG_ID": id, "GANG_SIZE": "3", "GANG_INDEX": "1", "GANG_PEERS": "w3:9000,w2:9000"}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("env %s = %q, want %q", k, env[k], v)
			}
		}
		if _, ok := env["CHECKPOINT_DATA"]; ok {
			t.Error("CHECKPOINT_DATA set before any checkpoint")
		}
		if stored := h.job(tasks[1].ID); stored.Env["GANG_ID"] != "" {
			t.Error("the gang's env was stored in the job; it belongs to the claim's reply")
		}
		if st := h.gangOf(id).Status; st != store.GangReserved {
			t.Errorf("gang is %s with two tasks unclaimed, want reserved", st)
		}
	})

	t.Run("ReservationIsAllOrNothing", func(t *testing.T) {
		h := setupGangs(t)
		h.gpu("w1", 8000, "gpu")
		h.gpu("w2", 8000, "gpu")
		h.gpu("small", 4000, "gpu")
		id, tasks := h.gang(3, gpuJob)
		cases := []struct {
			name    string
			cmd     fsm.Cmd
			target  error
			mention string
		}{
			{"OneWorkerTooSmall", reserveGang(id, 0, "w1", "w2", "small"), fsm.ErrConflict, "small"},
			{"TooFewWorkers", reserveGang(id, 0, "w1", "w2"), nil, "workers"},
			{"SameWorkerTwice", reserveGang(id, 0, "w1", "w2", "w1"), nil, "twice"},
			{"UnknownWorker", reserveGang(id, 0, "w1", "w2", "ghost"), fsm.ErrWorkerNotFound, "ghost"},
			{"StaleEpoch", reserveGang(id, 7, "w1", "w2", "small"), fsm.ErrStaleEpoch, "epoch"},
			{"UnknownGang", reserveGang("gang-99", 0, "w1", "w2", "small"), fsm.ErrGangNotFound, "gang-99"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				before := *h.gangOf(id)
				r := h.reject(c.cmd, c.target)
				if !strings.Contains(r.Err.Error(), c.mention) {
					t.Errorf("err %q does not mention %q", r.Err, c.mention)
				}
				if after := *h.gangOf(id); !reflect.DeepEqual(after, before) {
					t.Errorf("a refused reservation changed the gang: %+v", after)
				}
			})
		}
		h.status(store.StatusBlocked, jobIDs(tasks)...)
		if u := h.f.WorkerUsage(); len(u) != 0 {
			t.Errorf("usage after refused reservations: %v", u)
		}
	})

}

func TestGangSubmit(t *testing.T) {
	t.Run("TasksAreBlockedAndIndexed", func(t *testing.T) {
		h := setupGangs(t)
		id, tasks := h.gang(3, fsm.NewJob{Command: "x", Priority: 5, Env: map[string]string{"A": "1"}})
		g := h.gangOf(id)
		if id != "gang-1" || g.Size != 3 || g.Status != store.GangBlocked || !slices.Equal(g.Tasks, jobIDs(tasks)) || g.Priority != 5 {
			t.Fatalf("gang = %+v", g)
		}
		for i, j := range tasks {
			if j.Status != store.StatusBlocked || j.GangID != id || j.GangIndex != i || j.GangSize != 3 || j.Env["A"] != "1" {
				t.Errorf("task %d = %+v", i, j)
			}
		}
		if got := h.claimAs("w1", 5); len(got) != 0 {
			t.Fatalf("a blocked gang's tasks were claimed: %v", jobIDs(got))
		}
		if open := h.f.OpenGangs(); len(open) != 1 || open[0].ID != id {
			t.Errorf("OpenGangs = %+v", open)
		}
	})

	t.Run("IdempotencyKeyReturnsTheSameGang", func(t *testing.T) {
		h := setupGangs(t)
		nj := fsm.NewJob{Command: "x", IdempotencyKey: "k"}
		id, tasks := h.gang(2, nj)
		r := h.ok(submitGang(2, nj))
		if !r.Existing || r.Gang.ID != id || !slices.Equal(jobIDs(r.Jobs), jobIDs(tasks)) {
			t.Fatalf("resubmit = existing %v gang %+v jobs %v", r.Existing, r.Gang, jobIDs(r.Jobs))
		}
		h.submit(fsm.NewJob{Command: "y", IdempotencyKey: "plain"})
		h.reject(submitGang(2, fsm.NewJob{Command: "x", IdempotencyKey: "plain"}), fsm.ErrConflict)
	})

	t.Run("RefusesWhatAGangCannotBe", func(t *testing.T) {
		h := setupGangs(t)
		dep := h.submit(fsm.NewJob{Command: "d"})[0]
		for _, c := range []struct {
			field string
			cmd   fsm.Cmd
		}{
			{"gang_size", submitGang(0, fsm.NewJob{Command: "x"})},
			{"gang_size", submitGang(fsm.MaxGangSize+1, fsm.NewJob{Command: "x"})},
			{"resources", submitGang(2, fsm.NewJob{Command: "x", Resources: store.Resources{MemoryMB: -1}})},
			{"depends_on", submitGang(2, fsm.NewJob{Command: "x", DependsOn: []string{dep.ID}})},
			{"id", submitGang(2, fsm.NewJob{Command: "x", ID: "mine"})},
			{"command", submitGang(2, fsm.NewJob{})},
		} {
			r := h.reject(c.cmd, nil)
			var ve *fsm.ValidationError
			if !errors.As(r.Err, &ve) || ve.Field != c.field {
				t.Errorf("err = %v, want a ValidationError of %s", r.Err, c.field)
			}
		}
		if len(h.f.OpenGangs()) != 0 {
			t.Error("a refused gang submit left a gang")
		}
	})
}

// drainSetup runs a gang of 3 on w1..w3, with a fourth worker idle.
func drainSetup(t *testing.T, nj fsm.NewJob) (*harness, string, []*store.Job) {
	h := setupGangs(t)
	for _, w := range []string{"w1", "w2", "w3", "w4"} {
		h.gpu(w, 8000, "gpu")
	}
	id, _ := h.gang(3, nj)
	return h, id, h.runGang(id, "w1", "w2", "w3")
}

func TestGangDrain(t *testing.T) {
	t.Run("FailureDrainsSiblingsAndHandsOnTheirCheckpoints", func(t *testing.T) {
		h, id, run := drainSetup(t, gpuJob)
		h.at(time.Second)
		r := h.ok(fail(run[1].ID, run[1].Lease, "segfault"))
		g := h.gangOf(id)
		if g.Status != store.GangDraining || g.Failing != run[1].ID || g.Final || g.Epoch != 2 {
			t.Fatalf("after a task failed the gang is %+v", g)
		}
		if j := r.Jobs[0]; j.Status != store.StatusBlocked || j.Attempts != 1 {
			t.Fatalf("failed task = %s with %d attempts, want blocked after 1", j.Status, j.Attempts)
		}
		// The siblings hear it on either heartbeat.
		hb := h.ok(heartbeat(run[0].ID, run[0].Lease, ttl))
		if want := []fsm.Action{{JobID: run[0].ID, Lease: run[0].Lease, Action: "preempt", Epoch: g.Epoch}}; !reflect.DeepEqual(hb.Actions, want) {
			t.Fatalf("job heartbeat actions %+v, want %+v", hb.Actions, want)
		}
		whb := h.ok(workerHeartbeat("w3", ttl))
		if len(whb.Actions) != 1 || whb.Actions[0].Action != "preempt" || whb.Actions[0].Epoch != g.Epoch || whb.Actions[0].JobID != run[2].ID {
			t.Fatalf("worker heartbeat actions %+v", whb.Actions)
		}
		// Fencing: stale epochs and oversized checkpoints change nothing.
		h.reject(preempted(run[0].ID, g.Epoch-1), fsm.ErrStaleEpoch)
		h.reject(checkpoint(run[0].ID, g.Epoch+1, []byte("x")), fsm.ErrStaleEpoch)
		h.reject(preempted(run[1].ID, g.Epoch), fsm.ErrStaleEpoch) // the failed one has nothing to acknowledge
		h.reject(checkpoint(run[0].ID, g.Epoch, make([]byte, fsm.MaxCheckpointBytes+1)), nil)
		h.ok(checkpoint(run[0].ID, g.Epoch, []byte("old")))
		h.ok(checkpoint(run[0].ID, g.Epoch, []byte("step 41")))
		if data, epoch, err := h.f.Checkpoint(run[0].ID); err != nil || string(data) != "step 41" || epoch != g.Epoch {
			t.Fatalf("checkpoint = %q epoch %d err %v, want the latest", data, epoch, err)
		}
		h.ok(preempted(run[0].ID, g.Epoch))
		h.reject(preempted(run[0].ID, g.Epoch), fsm.ErrStaleEpoch) // once
		h.reject(checkpoint(run[0].ID, g.Epoch, []byte("late")), fsm.ErrStaleEpoch)
		if st := h.gangOf(id).Status; st != store.GangDraining {
			t.Fatalf("gang %s with one sibling still running, want draining", st)
		}
		// The last sibling's own failure report ends its part of the drain.
		h.ok(fail(run[2].ID, run[2].Lease, "terminated"))
		g = h.gangOf(id)
		if g.Status != store.GangBlocked || g.RunAt <= ns(h.now) {
			t.Fatalf("after the drain the gang is %s, run_at %d (now %d), want blocked after a backoff", g.Status, g.RunAt, ns(h.now))
		}
		for i, want := range []int{0, 1, 0} {
			if j := h.job(run[i].ID); j.Attempts != want || j.Status != store.StatusBlocked {
				t.Errorf("task %d: %s with %d attempts, want blocked with %d (siblings' attempts are given back)", i, j.Status, j.Attempts, want)
			}
		}
		h.reject(reserveGang(id, g.Epoch, "w4", "w2", "w3"), fsm.ErrConflict) // backoff
		h.at(time.Minute)
		rerun := h.runGang(id, "w4", "w2", "w3")
		if got := rerun[0].Env["CHECKPOINT_DATA"]; got != base64.StdEncoding.EncodeToString([]byte("step 41")) {
			t.Errorf("task 0's next attempt has CHECKPOINT_DATA %q", got)
		}
		if _, ok := rerun[2].Env["CHECKPOINT_DATA"]; ok {
			t.Error("task 2 left no checkpoint but its next attempt has one")
		}
		if rerun[0].Attempts != 1 || rerun[1].Attempts != 2 || rerun[0].Env["GANG_PEERS"] != "w2:9000,w3:9000" {
			t.Errorf("rerun attempts %d,%d peers %q", rerun[0].Attempts, rerun[1].Attempts, rerun[0].Env["GANG_PEERS"])
		}
		dependent := h.submit(fsm.NewJob{Command: "after", DependsOn: []string{rerun[0].ID}})[0]
		h.ok(succeed(rerun[0].ID, 0))
		h.ok(succeed(rerun[1].ID, 0))
		h.status(store.StatusBlocked, dependent.ID)
		h.ok(succeed(rerun[2].ID, 0))
		if g := h.gangOf(id); g.Status != store.GangDone {
			t.Fatalf("gang %s after every task was done", g.Status)
		}
		h.status(store.StatusPending, dependent.ID)
		if _, _, err := h.f.Checkpoint(rerun[0].ID); !errors.Is(err, fsm.ErrNotFound) {
			t.Errorf("checkpoint kept after the gang was done: %v", err)
		}
		if len(h.f.OpenGangs()) != 0 {
			t.Error("a done gang is still open")
		}
		snapshotRestore(t, h.f)
	})

	t.Run("UnacknowledgedPreemptionIsForceDrained", func(t *testing.T) {
		h, id, run := drainSetup(t, gpuJob)
		h.at(ttl).ok(expire(run[0].ID, run[0].Lease))
		g := h.gangOf(id)
		h.ok(preempted(run[1].ID, g.Epoch))
		h.reject(forceDrain(id, g.Epoch-1), fsm.ErrStaleEpoch)
		h.ok(forceDrain(id, g.Epoch))
		g2 := h.gangOf(id)
		j := h.job(run[2].ID)
		if g2.Status != store.GangBlocked || j.Status != store.StatusBlocked || j.Attempts != 0 {
			t.Fatalf("after force drain: gang %s, task 2 %s with %d attempts", g2.Status, j.Status, j.Attempts)
		}
		if last := j.History[len(j.History)-1]; !strings.Contains(last.Error, "force-drained") || !last.Expired {
			t.Errorf("force-drained attempt recorded as %+v", last)
		}
		// The worker that never acknowledged is fenced out.
		h.reject(succeed(run[2].ID, run[2].Lease), fsm.ErrStaleLease)
		h.reject(preempted(run[2].ID, g.Epoch), fsm.ErrStaleEpoch)
		h.reject(forceDrain(id, g.Epoch), fsm.ErrStaleEpoch)
		if u := h.f.WorkerUsage(); len(u) != 0 {
			t.Errorf("capacity still held after the drain: %v", u)
		}
	})

	t.Run("GangFailsAsAUnitWhenTheFailedTaskHasNoAttemptsLeft", func(t *testing.T) {
		nj := gpuJob
		nj.MaxAttempts = 1
		h, id, run := drainSetup(t, nj)
		dependent := h.submit(fsm.NewJob{Command: "after", DependsOn: []string{run[2].ID}})[0]
		h.ok(fail(run[0].ID, 0, "oom"))
		g := h.gangOf(id)
		if !g.Final || g.Status != store.GangDraining {
			t.Fatalf("gang %+v, want draining to fail", g)
		}
		h.ok(preempted(run[1].ID, g.Epoch))
		h.ok(preempted(run[2].ID, g.Epoch))
		if g := h.gangOf(id); g.Status != store.GangFailed {
			t.Fatalf("gang %s, want failed", g.Status)
		}
		h.status(store.StatusFailed, run[0].ID, run[1].ID, run[2].ID, dependent.ID)
		if j := h.job(run[1].ID); !strings.Contains(j.LastError, "oom") || j.Attempts != 0 {
			t.Errorf("innocent task: attempts %d, last_error %q", j.Attempts, j.LastError)
		}
		// Retrying any task retries the gang.
		h.ok(retry(run[1].ID))
		h.status(store.StatusBlocked, run[0].ID, run[1].ID, run[2].ID)
		if g := h.gangOf(id); g.Status != store.GangBlocked {
			t.Fatalf("retried gang is %s", g.Status)
		}
		// The plain retry leaves the dependent the gang's failure ended.
		h.status(store.StatusFailed, dependent.ID)
	})

	t.Run("RetriedGangRevivesTheDependentsOfItsTasks", func(t *testing.T) {
		nj := gpuJob
		nj.MaxAttempts = 1
		h, id, run := drainSetup(t, nj)
		// after0 depends on task 0, both on tasks 1 and 2, then on after0.
		deps := h.submit(
			fsm.NewJob{Command: "after0", DependsOn: []string{run[0].ID}},
			fsm.NewJob{Command: "both", DependsOn: []string{run[1].ID, run[2].ID}},
			fsm.NewJob{Command: "then", DependsOn: []string{"$0"}},
		)
		h.ok(fail(run[0].ID, 0, "oom"))
		g := h.gangOf(id)
		h.ok(preempted(run[1].ID, g.Epoch))
		h.ok(preempted(run[2].ID, g.Epoch))
		h.status(store.StatusFailed, deps[0].ID, deps[1].ID, deps[2].ID)

		r := h.at(time.Minute).ok(retryDeps(run[2].ID))
		if got, want := jobIDs(r.Jobs), []string{run[2].ID, deps[0].ID, deps[2].ID, deps[1].ID}; !slices.Equal(got, want) {
			t.Fatalf("retry answered %v, want the task then the revived dependents %v", got, want)
		}
		h.status(store.StatusBlocked, deps[0].ID, deps[1].ID, deps[2].ID)
		if j := h.job(deps[1].ID); j.Waiting != 2 || j.LastError != "" {
			t.Fatalf("%s waits on %d with error %q, want both tasks and no error", j.ID, j.Waiting, j.LastError)
		}
		rerun := h.runGang(id, "w1", "w2", "w3")
		for _, task := range rerun {
			h.ok(succeed(task.ID, 0))
		}
		h.status(store.StatusPending, deps[0].ID, deps[1].ID)
		h.status(store.StatusBlocked, deps[2].ID)
		checkIndexes(t, h.f)
	})

	t.Run("ReservationNotClaimedInTimeRollsBack", func(t *testing.T) {
		h := setupGangs(t)
		for _, w := range []string{"w1", "w2", "w3"} {
			h.gpu(w, 8000, "gpu")
		}
		id, tasks := h.gang(3, gpuJob)
		h.ok(reserveGang(id, 0, "w1", "w2", "w3"))
		ep := h.gangOf(id).Epoch
		// Nobody claimed: straight back to blocked.
		h.reject(unreserveGang(id, ep+1), fsm.ErrStaleEpoch)
		h.ok(unreserveGang(id, ep))
		h.status(store.StatusBlocked, jobIDs(tasks)...)
		if g := h.gangOf(id); g.Status != store.GangBlocked {
			t.Fatalf("gang %s", g.Status)
		}
		// One claimed: it is preempted, the others roll back at once.
		h.ok(reserveGang(id, h.gangOf(id).Epoch, "w1", "w2", "w3"))
		got := h.claimAs("w2", 1)
		ep = h.gangOf(id).Epoch
		h.ok(unreserveGang(id, ep))
		g := h.gangOf(id)
		h.status(store.StatusBlocked, tasks[0].ID, tasks[2].ID)
		if g.Status != store.GangDraining || h.job(got[0].ID).PreemptEpoch != g.Epoch {
			t.Fatalf("gang %s, claimed task preempt epoch %d", g.Status, h.job(got[0].ID).PreemptEpoch)
		}
		h.ok(preempted(got[0].ID, g.Epoch))
		if j := h.job(got[0].ID); j.Attempts != 0 || h.gangOf(id).Status != store.GangBlocked {
			t.Fatalf("after the ack: %d attempts, gang %s", j.Attempts, h.gangOf(id).Status)
		}
	})

	t.Run("WorkerOfflineExpiresItsLeasesAndReservations", func(t *testing.T) {
		h, id, run := drainSetup(t, gpuJob)
		plain := h.submit(fsm.NewJob{Command: "p", MaxAttempts: 3})[0]
		h.claimAs("w1", 1)
		other, _ := h.gang(1, gpuJob)
		h.ok(reserveGang(other, 0, "w4"))
		seen := h.job(run[0].ID).StartedAt
		h.at(time.Second).ok(workerHeartbeat("w4", ttl))
		h.reject(workerOffline("w4", seen), fsm.ErrConflict) // heard from since
		h.reject(workerOffline("ghost", seen), fsm.ErrWorkerNotFound)
		w4, _ := h.f.Worker("w4")
		h.at(time.Minute).ok(workerOffline("w4", w4.LastHeartbeat))
		if g := h.gangOf(other); g.Status != store.GangBlocked {
			t.Fatalf("gang reserved on the offline worker is %s, want blocked", g.Status)
		}
		w1, _ := h.f.Worker("w1")
		r := h.ok(workerOffline("w1", w1.LastHeartbeat))
		if len(r.Jobs) != 2 {
			t.Fatalf("offline ended %v, want w1's two leases", jobIDs(r.Jobs))
		}
		if j := h.job(plain.ID); j.Status != store.StatusPending || !strings.Contains(j.LastError, "offline") {
			t.Errorf("plain job: %s %q", j.Status, j.LastError)
		}
		g := h.gangOf(id)
		if g.Status != store.GangDraining || g.Failing != run[0].ID || h.job(run[0].ID).Attempts != 1 {
			t.Fatalf("gang %+v", g)
		}
		if w, _ := h.f.Worker("w1"); !w.Offline() {
			t.Error("w1 is not marked offline")
		}
		// A sibling whose lease expires during the drain gets its attempt back.
		h.at(time.Minute + 2*ttl).ok(expire(run[1].ID, run[1].Lease))
		h.ok(preempted(run[2].ID, g.Epoch))
		if j := h.job(run[1].ID); j.Attempts != 0 || h.gangOf(id).Status != store.GangBlocked {
			t.Fatalf("expired sibling has %d attempts, gang %s", j.Attempts, h.gangOf(id).Status)
		}
	})

	t.Run("DoneTasksRunAgainWithTheirGang", func(t *testing.T) {
		nj := gpuJob
		nj.Retention = int64(time.Hour)
		h, id, run := drainSetup(t, nj)
		h.ok(succeed(run[0].ID, 0))
		if j := h.job(run[0].ID); j.ExpireAt != 0 {
			t.Error("a done task of a running gang got a retention expiry")
		}
		h.ok(fail(run[1].ID, 0, "x"))
		h.ok(preempted(run[2].ID, h.gangOf(id).Epoch))
		if j := h.job(run[0].ID); j.Status != store.StatusBlocked || j.Attempts != 0 {
			t.Fatalf("done task: %s with %d attempts, want blocked with 0", j.Status, j.Attempts)
		}
	})

	t.Run("CancelStopsTheWholeGang", func(t *testing.T) {
		h, id, run := drainSetup(t, gpuJob)
		h.ok(cancel(run[1].ID, true))
		h.status(store.StatusCancelling, run[0].ID, run[1].ID, run[2].ID)
		if g := h.gangOf(id); g.Status != store.GangCancelled {
			t.Fatalf("gang %s", g.Status)
		}
		hb := h.ok(heartbeat(run[0].ID, 0, ttl))
		if len(hb.Actions) != 1 || hb.Actions[0].Action != "cancel" {
			t.Fatalf("actions %+v", hb.Actions)
		}
		for _, j := range run {
			h.ok(fail(j.ID, 0, "killed"))
		}
		h.status(store.StatusCancelled, run[0].ID, run[1].ID, run[2].ID)
		h.reject(retry(run[0].ID+"x"), fsm.ErrNotFound)
		h.ok(retry(run[0].ID))
		h.status(store.StatusBlocked, run[0].ID, run[1].ID, run[2].ID)
	})
}

// gangLog is a scripted log of gang commands with plain jobs beside them.
func gangLog(t *testing.T) []*raft.Log {
	var logs []*raft.Log
	at := func(d time.Duration, cmds ...fsm.Cmd) {
		logs = append(logs, commandLog(t, uint64(len(logs)+1), t0.Add(d), cmds...))
	}
	nj := gpuJob
	nj.Retention = int64(time.Hour)
	at(0, register(store.Worker{ID: "w1", VRAMMB: 8000, Tags: []string{"gpu"}}), register(store.Worker{ID: "w2", VRAMMB: 16000, Tags: []string{"gpu"}}),
		register(store.Worker{ID: "w3", VRAMMB: 8000, Tags: []string{"gpu"}}))
	at(time.Second, submitGang(2, nj), submit(fsm.NewJob{Command: "p", Resources: store.Resources{VRAMMB: 8000}}))
	at(2*time.Second, reserveGang("gang-1", 0, "w1", "w2"), claimCmd(fsm.Claim{WorkerID: "w2", Max: 4, LeaseTTL: int64(ttl)}))
	at(3*time.Second, claimCmd(fsm.Claim{WorkerID: "w1", LeaseTTL: int64(ttl)}), submitGang(1, nj))
	at(4*time.Second, fail("job-1", 0, "boom"), reserveGang("gang-4", 0, "w3"))
	at(5*time.Second, checkpoint("job-2", 2, []byte("state")), preempted("job-2", 3), preempted("job-2", 2))
	at(6*time.Second, workerOffline("w3", ns(t0)), submitGang(2, nj))
	at(time.Minute, reserveGang("gang-1", 2, "w2", "w3"), reserveGang("gang-1", 2, "w3", "w1"))
	at(time.Minute+time.Second, workerHeartbeat("w3", ttl), reserveGang("gang-1", 2, "w3", "w1"), claimCmd(fsm.Claim{WorkerID: "w1", LeaseTTL: int64(ttl)}))
	at(time.Minute+2*time.Second, unreserveGang("gang-1", 3), reserveGang("gang-5", 0, "w2", "w3"))
	at(time.Minute+3*time.Second, forceDrain("gang-1", 4), claimCmd(fsm.Claim{WorkerID: "w2", LeaseTTL: int64(ttl)}), claimCmd(fsm.Claim{WorkerID: "w3", LeaseTTL: int64(ttl)}))
	at(time.Minute+4*time.Second, succeed("job-5", 0), succeed("job-6", 0), cancel("job-4", true))
	at(3*time.Hour, fsm.Cmd{Op: fsm.OpDelete, Delete: &fsm.Delete{IDs: []string{"job-5", "job-6", "job-4"}}})
	return logs
}

func TestGangDeterminism(t *testing.T) {
	logs := gangLog(t)
	a := setupGangs(t)
	var replies []any
	for _, l := range logs {
		replies = append(replies, a.f.ApplyBatch([]*raft.Log{l})...)
	}
	rejected := 0
	for _, r := range replies {
		for _, res := range r.([]fsm.Result) {
			if res.Err != nil {
				rejected++
			}
		}
	}
	if rejected == 0 {
		t.Fatal("the scripted log was never refused anything; it tests too little")
	}
	want := digest(t, a.f)
	b := setupGangs(t)
	if !slices.Equal(resultsJSON(t, b.f.ApplyBatch(logs)), resultsJSON(t, replies)) || digest(t, b.f) != want {
		t.Fatal("one batch and entry by entry ended in different states")
	}
	c := setupGangs(t)
	c.f.ApplyBatch(logs[:len(logs)/2])
	d := snapshotRestore(t, c.f)
	d.ApplyBatch(logs[len(logs)/2:])
	if digest(t, d) != want {
		t.Fatal("snapshot midway then the rest ended in a different state")
	}
	if !reflect.DeepEqual(d.WorkerUsage(), a.f.WorkerUsage()) || !reflect.DeepEqual(d.OpenGangs(), a.f.OpenGangs()) {
		t.Fatal("restored indexes differ")
	}
	if _, _, err := a.f.Gang("gang-4"); !errors.Is(err, fsm.ErrGangNotFound) {
		t.Errorf("gang-4 after its task was deleted: %v", err)
	}
}

func TestGangEncoding(t *testing.T) {
	cmds := []fsm.Cmd{
		submitGang(3, fsm.NewJob{Command: "x", Resources: store.Resources{VRAMMB: 1, MemoryMB: 2, CPUMillis: 3, Slots: 4}, Tags: []string{"a"}}),
		reserveGang("gang-1", 2, "a", "b", "c"), unreserveGang("gang-1", 3), forceDrain("gang-1", 4),
		workerOffline("w", 99), preempted("job-1", 5), checkpoint("job-1", 5, []byte{0, 1, 2, 255}),
	}
	e := &fsm.Entry{Now: ns(t0), Cmds: cmds}
	data, err := fsm.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := fsm.Decode(data)
	if err != nil || !reflect.DeepEqual(got, e) {
		t.Fatalf("round trip = %+v, %v", got, err)
	}
	for _, op := range []fsm.Op{fsm.OpSubmitGang, fsm.OpReserveGang, fsm.OpUnreserveGang, fsm.OpForceDrain, fsm.OpWorkerOffline, fsm.OpPreempted, fsm.OpCheckpoint} {
		bad := fmt.Sprintf("\x01{\"now\":1,\"cmds\":[{\"op\":%q}]}", op)
		if _, err := fsm.Decode([]byte(bad)); err == nil {
			t.Errorf("%s without its arguments decoded", op)
		}
	}
	if !bytes.Equal(data, mustEncode(t, e)) {
		t.Error("the same entry encoded two ways")
	}
}

func mustEncode(t testing.TB, e *fsm.Entry) []byte {
	t.Helper()
	b, err := fsm.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
