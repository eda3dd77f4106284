//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package leader

import (
	"context"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// statusOnly is a Compile for tests: the selector text is a queue name,
// "" for any queue.
func statusOnly(text string, _ int64) (store.ListQuery, error) {
	if text == "" {
		return store.ListQuery{}, nil
	}
	return store.ListQuery{Match: func(j *store.Job) bool { return j.Queue == text }}, nil
}

func TestBulker(t *testing.T) {
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	setup := func(t *testing.T, a, b int) (*env, *Bulker) {
		e := newEnv(t, start)
		cfg := DefaultBulkerConfig()
		cfg.Proposer, cfg.State, cfg.Compile, cfg.Now = e, e.f, statusOnly, e.clock.Now
		bk, err := NewBulker(cfg)
		if err != nil {
			t.Fatal(err)
		}
		// Queue a first: its jobs are the oldest, where the walk ends.
		for _, qn := range []struct {
			q string
			n int
		}{{"a", a}, {"b", b}} {
			q, n := qn.q, qn.n
			for n > 0 {
				var jobs []fsm.NewJob
				for ; n > 0 && len(jobs) < 1000; n-- {
					jobs = append(jobs, fsm.NewJob{Command: "x", Queue: q})
				}
				e.propose(fsm.Cmd{Op: fsm.OpSubmit, Submit: &fsm.Submit{Jobs: jobs}})
			}
		}
		return e, bk
	}
	startBulk := func(e *env, action, queue string, st store.Status) *store.Bulk {
		return e.propose(fsm.Cmd{Op: fsm.OpBulkStart, BulkStart: &fsm.BulkStart{Action: action, Selector: queue, Status: st}}).Bulk
	}
	count := func(t *testing.T, e *env, st store.Status, queue string) int64 {
		n, _, _, err := e.f.CountJobs(store.ListQuery{Status: st, Match: func(j *store.Job) bool { return j.Queue == queue }}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return int64(n)
	}

	t.Run("CancelsWhatTheSelectorMatchesInChunks", func(t *testing.T) {
		e, bk := setup(t, 2500, 10)
		b := startBulk(e, fsm.BulkCancel, "a", store.StatusPending)
		before := e.proposals()
		for bk.runOnce(context.Background()) {
		}
		if steps := e.proposals() - before; steps != 25 {
			t.Errorf("%d steps for 2500 jobs, want 25 of at most %d", steps, DefaultBulkerConfig().Chunk)
		}
		got, err := e.f.Bulk(b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != store.BulkDone || got.Matched != 2500 || got.Done != 2500 || got.Skipped != 0 || got.Failed != 0 {
			t.Errorf("after the walk: %+v, want done with 2500 matched and done", got)
		}
		if c, p := count(t, e, store.StatusCancelled, "a"), count(t, e, store.StatusPending, "b"); c != 2500 || p != 10 {
			t.Errorf("%d of queue a cancelled (want 2500), %d of queue b still pending (want 10)", c, p)
		}
	})

	t.Run("RetriesEachJobOnceAndSkipsWhatNoLongerQualifies", func(t *testing.T) {
		e, bk := setup(t, 1500, 0)
		startBulk(e, fsm.BulkCancel, "a", "")
		for bk.runOnce(context.Background()) {
		}
		// One job is retried by hand first: the bulk retry skips it.
		e.propose(fsm.Cmd{Op: fsm.OpRetry, Retry: &fsm.Retry{JobID: "job-7"}})
		b := startBulk(e, fsm.BulkRetry, "a", store.StatusCancelled)
		for bk.runOnce(context.Background()) {
		}
		got, _ := e.f.Bulk(b.ID)
		if got.State != store.BulkDone || got.Matched != 1499 || got.Done != 1499 {
			t.Errorf("after the retry: %+v, want 1499 matched and done", got)
		}
		if n := count(t, e, store.StatusPending, "a"); n != 1500 {
			t.Errorf("%d pending after the retry, want 1500", n)
		}
	})

	t.Run("AStepProposedTwiceChangesNothing", func(t *testing.T) {
		e, _ := setup(t, 5, 0)
		b := startBulk(e, fsm.BulkPriority, "a", "")
		if _, err := e.Propose(context.Background(), fsm.Cmd{Op: fsm.OpBulkStart, BulkStart: &fsm.BulkStart{Action: "erase"}}); err == nil {
			t.Error("a bulk action of action erase was accepted")
		}
		step := fsm.Cmd{Op: fsm.OpBulkStep, BulkStep: &fsm.BulkStep{ID: b.ID, From: b.Cursor, Next: 3, IDs: []string{"job-5", "job-4", "job-3"}}}
		e.propose(step)
		again := e.propose(step).Bulk
		if again.Matched != 3 || again.Done != 3 || again.Cursor != 3 {
			t.Errorf("after the same step twice: %+v, want 3 matched and done, cursor 3", again)
		}
	})

	t.Run("StopHaltsItBetweenSteps", func(t *testing.T) {
		e, bk := setup(t, 2500, 0)
		b := startBulk(e, fsm.BulkCancel, "a", "")
		if !bk.runOnce(context.Background()) {
			t.Fatal("no step proposed")
		}
		e.propose(fsm.Cmd{Op: fsm.OpBulkStop, BulkStop: &fsm.BulkStop{ID: b.ID}})
		if bk.runOnce(context.Background()) {
			t.Error("a step proposed after the stop")
		}
		got, _ := e.f.Bulk(b.ID)
		chunk := int64(DefaultBulkerConfig().Chunk)
		if got.State != store.BulkStopped || got.Done != chunk {
			t.Errorf("after stop: %+v, want stopped with %d done", got, chunk)
		}
		if n := count(t, e, store.StatusCancelled, "a"); n != chunk {
			t.Errorf("%d cancelled, want %d", n, chunk)
		}
	})
}
