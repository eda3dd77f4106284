package fsm_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// The API's limits (api.MaxDependents, api.MaxBatchDependencies,
// api.MaxDependencies and Config.MaxBatchJobs) that bound the entries below.
const (
	maxDependents        = 10_000
	maxBatchDependencies = 10_000
	maxDependencies      = 1000
	maxBatchJobs         = 1000
)

// TestApplyCostIsBounded applies the worst entries the API's limits let a
// client cause and checks that each does work in proportion to what it adds
// or changes, never to what the jobs it touches already hold: an edge added
// to a job with maxDependents dependents writes what one added to a job
// with none writes, and a batch rewrites none of the jobs it depends on.
// Each entry's apply time and page bytes written are logged, not asserted.
func TestApplyCostIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("applies about 30,000 jobs")
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	f, err := fsm.New(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Check(); err != nil {
			t.Errorf("check: %v", err)
		}
		st.Close()
	})
	h := &harness{t: t, f: f, now: t0}
	// measure applies cmd as the next entry and returns its bytes written.
	measure := func(name string, cmd fsm.Cmd) (fsm.Result, int64) {
		t.Helper()
		before := st.BytesWritten()
		start := time.Now()
		r := h.ok(cmd)
		took := time.Since(start)
		n := st.BytesWritten() - before
		t.Logf("%-58s apply %8.2f ms, %6d KiB of pages written", name, float64(took.Microseconds())/1000, n>>10)
		return r, n
	}
	// rewritten lists the jobs among ids whose record the last entry wrote.
	rewritten := func(ids []string) []string {
		var out []string
		for _, id := range ids {
			if h.job(id).ModifyIndex == h.index {
				out = append(out, id)
			}
		}
		return out
	}

	hot := h.submit(fsm.NewJob{Command: "hot parent"})[0].ID
	h.submit(fsm.NewJob{Command: "x", DependsOn: []string{hot}})
	fan := make([]fsm.NewJob, maxBatchJobs)
	for i := range fan {
		fan[i] = fsm.NewJob{Command: "x", DependsOn: []string{hot}}
	}
	for range maxDependents/maxBatchJobs - 1 {
		measure(fmt.Sprintf("%d dependents onto one with %d", len(fan), h.dependentCount(hot)), submit(fan...))
	}
	fan = fan[:maxBatchJobs-2]
	measure(fmt.Sprintf("%d dependents onto one with %d", len(fan), h.dependentCount(hot)), submit(fan...))
	if n := h.dependentCount(hot); n != maxDependents-1 {
		t.Fatalf("hot parent has %d dependents, want %d", n, maxDependents-1)
	}
	// Onto a job with no dependents, then the hot one, in a store of the
	// same size: the same pages but for the edge bucket's leaves.
	cold := h.submit(fsm.NewJob{Command: "cold parent"})[0].ID
	_, first := measure("one dependent onto a job with none", submit(fsm.NewJob{Command: "x", DependsOn: []string{cold}}))
	_, last := measure(fmt.Sprintf("one dependent onto a job with %d", maxDependents-1), submit(fsm.NewJob{Command: "x", DependsOn: []string{hot}}))
	if got := rewritten([]string{hot}); len(got) != 0 {
		t.Errorf("adding a dependent rewrote the parent's record")
	}
	// Slack for a leaf split or two where the hot job's edges sit; its
	// record alone (a list of 9,999 ids) was 25 pages.
	if last > first+4*4096 {
		t.Errorf("adding one dependent wrote %d bytes onto a job with %d dependents, %d onto one with none", last, maxDependents-1, first)
	}

	t.Run("AFanInBatchRewritesNoParent", func(t *testing.T) {
		parents := make([]string, maxDependencies)
		for i, j := range h.submit(fan[:maxDependencies]...) {
			parents[i] = j.ID
		}
		batch := make([]fsm.NewJob, maxBatchDependencies/maxDependencies)
		for i := range batch {
			batch[i] = fsm.NewJob{Command: "x", DependsOn: parents}
		}
		measure(fmt.Sprintf("%d jobs x %d dependencies each (%d edges)", len(batch), len(parents), len(batch)*len(parents)), submit(batch...))
		if got := rewritten(parents); len(got) != 0 {
			t.Errorf("the batch rewrote %d of its %d parents", len(got), len(parents))
		}
		if n := h.dependentCount(parents[0]); n != len(batch) {
			t.Errorf("a parent has %d dependents, want %d", n, len(batch))
		}
	})

	t.Run("EndingAHotParent", func(t *testing.T) {
		r, _ := measure(fmt.Sprintf("cancel with cascade of a job with %d dependents", maxDependents), cancel(hot, true))
		if r.Jobs[0].Status != store.StatusCancelled {
			t.Fatalf("hot parent %s", r.Jobs[0].Status)
		}
		h.status(store.StatusCancelled, h.dependents(hot)[maxDependents-1])
		measure(fmt.Sprintf("retry reviving %d dependents", maxDependents), retryDeps(hot))
		h.status(store.StatusBlocked, h.dependents(hot)[maxDependents-1])
	})
}

// dependentCount is how many jobs depend on the job.
func (h *harness) dependentCount(id string) int {
	h.t.Helper()
	n, err := h.f.DependentCounts([]string{id})
	if err != nil {
		h.t.Fatal(err)
	}
	return n[id]
}
