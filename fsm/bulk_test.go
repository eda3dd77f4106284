//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package fsm_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

func bulkStart(action string, st store.Status, prio int) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpBulkStart, BulkStart: &fsm.BulkStart{Action: action, Selector: "status=" + string(st), Status: st, Priority: prio}}
}

func bulkStep(id, from, next uint64, ids ...string) fsm.Cmd {
	return fsm.Cmd{Op: fsm.OpBulkStep, BulkStep: &fsm.BulkStep{ID: id, From: from, Next: next, IDs: ids}}
}

func TestBulk(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	setup := func(t *testing.T, n int) (*fsm.FSM, *uint64) {
		f := newTestFSM(t)
		idx := uint64(1)
		jobs := make([]fsm.NewJob, n)
		for i := range jobs {
			jobs[i] = fsm.NewJob{Command: "x"}
		}
		applyCmd(t, f, idx, now, fsm.Cmd{Op: fsm.OpSubmit, Submit: &fsm.Submit{Jobs: jobs}})
		return f, &idx
	}
	apply := func(t *testing.T, f *fsm.FSM, idx *uint64, c fsm.Cmd) fsm.Result {
		t.Helper()
		*idx++
		return applyCmd(t, f, *idx, now, c)[0]
	}

	t.Run("EntriesOfProtocol4Decode", func(t *testing.T) {
		for _, data := range protocol4BulkEntries {
			e := mustDecode(t, data)
			if c := e.Cmds[0]; c.Protocol() != fsm.ProtocolBulk {
				t.Errorf("%s needs protocol %d, want %d", c.Op, c.Protocol(), fsm.ProtocolBulk)
			}
		}
	})

	t.Run("AStepActsOnlyOnJobsOfItsRangeAndStatusOnce", func(t *testing.T) {
		f, idx := setup(t, 6)
		apply(t, f, idx, fsm.Cmd{Op: fsm.OpCancel, Cancel: &fsm.Cancel{JobID: "job-2"}})
		b := apply(t, f, idx, bulkStart(fsm.BulkCancel, store.StatusPending, 0)).Bulk
		if b.Cursor != 7 || b.State != store.BulkRunning {
			t.Fatalf("started as %+v, want running with cursor 7 (above job-6)", b)
		}
		// The step's range is seqs [4, 7): job-3 is below it, job-2 is
		// cancelled already, job-4 is named twice, job-9 does not exist.
		got := apply(t, f, idx, bulkStep(b.ID, 7, 4, "job-6", "job-4", "job-4", "job-3", "job-2", "job-9")).Bulk
		if got.Matched != 6 || got.Done != 2 || got.Skipped != 4 || got.Cursor != 4 {
			t.Errorf("after the step: %+v, want 6 matched, 2 done (job-6, job-4), 4 skipped, cursor 4", got)
		}
		for id, want := range map[string]store.Status{"job-6": store.StatusCancelled, "job-4": store.StatusCancelled, "job-3": store.StatusPending, "job-5": store.StatusPending} {
			if j, _ := f.Job(id); j.Status != want {
				t.Errorf("%s is %s, want %s", id, j.Status, want)
			}
		}
		again := apply(t, f, idx, bulkStep(b.ID, 7, 4, "job-5")).Bulk
		if again.Matched != 6 {
			t.Errorf("a step from a cursor already passed applied: %+v", again)
		}
		if j, _ := f.Job("job-5"); j.Status != store.StatusPending {
			t.Errorf("job-5 is %s after a stale step, want pending", j.Status)
		}
		last := apply(t, f, idx, bulkStep(b.ID, 4, 0, "job-3", "job-1")).Bulk
		if last.State != store.BulkDone || last.Done != 4 {
			t.Errorf("after the last step: %+v, want done with 4 done", last)
		}
		apply(t, f, idx, fsm.Cmd{Op: fsm.OpBulkStop, BulkStop: &fsm.BulkStop{ID: b.ID}})
		if b, _ := f.Bulk(b.ID); b.State != store.BulkDone {
			t.Errorf("a stop of a done action made it %s", b.State)
		}
		snapshotRestore(t, f)
	})

	t.Run("DeleteTakesFinishedJobsAndPriorityReordersPending", func(t *testing.T) {
		f, idx := setup(t, 3)
		apply(t, f, idx, fsm.Cmd{Op: fsm.OpCancel, Cancel: &fsm.Cancel{JobID: "job-1"}})
		d := apply(t, f, idx, bulkStart(fsm.BulkDelete, "", 0)).Bulk
		got := apply(t, f, idx, bulkStep(d.ID, d.Cursor, 0, "job-3", "job-2", "job-1")).Bulk
		if got.Done != 1 || got.Skipped != 2 {
			t.Errorf("bulk delete: %+v, want job-1 deleted, 2 skipped (not finished)", got)
		}
		if _, err := f.Job("job-1"); !errors.Is(err, fsm.ErrNotFound) {
			t.Errorf("job-1 after the bulk delete: %v", err)
		}
		p := apply(t, f, idx, bulkStart(fsm.BulkPriority, store.StatusPending, 9)).Bulk
		apply(t, f, idx, bulkStep(p.ID, p.Cursor, 0, "job-2"))
		if j, _ := f.Job("job-2"); j.Priority != 9 {
			t.Errorf("job-2's priority %d, want 9", j.Priority)
		}
		*idx++
		res := applyCmd(t, f, *idx, now, fsm.Cmd{Op: fsm.OpClaim, Claim: &fsm.Claim{WorkerID: "w", Max: 1, LeaseTTL: int64(time.Minute), Shell: true}})[0]
		if len(res.Jobs) != 1 || res.Jobs[0].ID != "job-2" {
			t.Errorf("a claim took %v, want job-2, now first by priority", res.Jobs)
		}
	})

	t.Run("BoundsRunningAndKept", func(t *testing.T) {
		f, idx := setup(t, 1)
		var ids []uint64
		for range fsm.MaxBulkRunning {
			ids = append(ids, apply(t, f, idx, bulkStart(fsm.BulkRetry, store.StatusFailed, 0)).Bulk.ID)
		}
		if res := apply(t, f, idx, bulkStart(fsm.BulkRetry, store.StatusFailed, 0)); !errors.Is(res.Err, fsm.ErrTooManyBulk) {
			t.Fatalf("one more than MaxBulkRunning: %v, want ErrTooManyBulk", res.Err)
		}
		for i := range fsm.MaxBulkKept + 10 {
			if i < len(ids) {
				apply(t, f, idx, fsm.Cmd{Op: fsm.OpBulkStop, BulkStop: &fsm.BulkStop{ID: ids[i]}})
				continue
			}
			b := apply(t, f, idx, bulkStart(fsm.BulkRetry, store.StatusFailed, 0)).Bulk
			apply(t, f, idx, fsm.Cmd{Op: fsm.OpBulkStop, BulkStop: &fsm.BulkStop{ID: b.ID}})
		}
		if n := len(f.Bulks()); n != fsm.MaxBulkKept {
			t.Errorf("%d bulk actions kept, want %d", n, fsm.MaxBulkKept)
		}
		if _, err := f.Bulk(1); !errors.Is(err, fsm.ErrBulkNotFound) {
			t.Errorf("the oldest action after more than MaxBulkKept: %v, want it dropped", err)
		}
		for _, bad := range []fsm.Cmd{
			bulkStart("erase", "", 0),
			bulkStart(fsm.BulkPriority, "", fsm.MaxBulkPriority+1),
			bulkStart(fsm.BulkRetry, "lost", 0),
		} {
			if res := apply(t, f, idx, bad); res.Err == nil {
				t.Errorf("%+v accepted", bad.BulkStart)
			}
		}
		b := apply(t, f, idx, bulkStart(fsm.BulkRetry, "", 0)).Bulk
		many := make([]string, fsm.MaxBulkChunk+1)
		for i := range many {
			many[i] = fmt.Sprintf("job-%d", i)
		}
		if res := apply(t, f, idx, bulkStep(b.ID, b.Cursor, 0, many...)); res.Err == nil {
			t.Error("a step of more than MaxBulkChunk ids accepted")
		}
		if res := apply(t, f, idx, bulkStep(b.ID, b.Cursor, b.Cursor, "job-1")); res.Err == nil {
			t.Error("a step that does not move its cursor down accepted")
		}
	})
}
