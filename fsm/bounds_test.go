package fsm_test

import (
	"fmt"
	"syscall"
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
// Under the race detector the load is divided by raceScale.
func TestApplyCostIsBounded(t *testing.T) {
	st, f := newTestStoreFSM(t)
	h := &harness{t: t, f: f, now: t0}
	// measure applies cmd as the next entry and returns its bytes written.
	measure := func(name string, cmd fsm.Cmd) (fsm.Result, int64) {
		t.Helper()
		before := st.BytesWritten()
		cpu := cpuTime()
		start := time.Now()
		r := h.ok(cmd)
		took := time.Since(start)
		cpu = cpuTime() - cpu
		n := st.BytesWritten() - before
		t.Logf("%-58s apply %8.2f ms (%8.2f ms CPU), %6d KiB of pages written", name, ms(took), ms(cpu), n>>10)
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

	// The hot job's dependents have long ids (as clients may give), so that
	// a list of them in its record, as state format 2 kept, would be large.
	// Ids are chosen so that the jobs measured below sort away from the hot
	// one: a bbolt leaf is written whole when any of its keys changes.
	dependents := maxDependents / raceScale
	hot := h.submit(fsm.NewJob{ID: "a-hot", Command: "hot parent"})[0].ID
	var fan []fsm.NewJob
	for i := range dependents - 1 {
		fan = append(fan, fsm.NewJob{ID: fmt.Sprintf("dependent-%0190d", i), Command: "x", DependsOn: []string{hot}})
		if len(fan) == maxBatchJobs || i == dependents-2 {
			measure(fmt.Sprintf("%d dependents onto one with %d", len(fan), h.dependentCount(hot)), submit(fan...))
			fan = fan[:0]
		}
	}
	if n := h.dependentCount(hot); n != dependents-1 {
		t.Fatalf("hot parent has %d dependents, want %d", n, dependents-1)
	}
	// Onto a job with no dependents, then the hot one, in a store of the
	// same size: the same pages but for the edge bucket's leaves.
	cold := h.submit(fsm.NewJob{ID: "zz-cold", Command: "cold parent"})[0].ID
	long := func(s string) string { return fmt.Sprintf("%s-%0190d", s, 0) }
	_, first := measure("one dependent onto a job with none", submit(fsm.NewJob{ID: long("zz-cold-child"), Command: "x", DependsOn: []string{cold}}))
	_, last := measure(fmt.Sprintf("one dependent onto a job with %d", dependents-1), submit(fsm.NewJob{ID: long("zz-hot-child"), Command: "x", DependsOn: []string{hot}}))
	if got := rewritten([]string{hot}); len(got) != 0 {
		t.Errorf("adding a dependent rewrote the parent's record")
	}
	// Slack for a leaf split or two where the hot job's edges sit; a list
	// of its dependents' ids would take 50 pages per thousand.
	if last > first+4*4096 {
		t.Errorf("adding one dependent wrote %d bytes onto a job with %d dependents, %d onto one with none", last, dependents-1, first)
	}

	t.Run("AFanInBatchRewritesNoParent", func(t *testing.T) {
		parents := make([]string, maxDependencies)
		fan := make([]fsm.NewJob, maxDependencies)
		for i := range fan {
			fan[i] = fsm.NewJob{Command: "parent"}
		}
		for i, j := range h.submit(fan...) {
			parents[i] = j.ID
		}
		batch := make([]fsm.NewJob, maxBatchDependencies/maxDependencies/raceScale)
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
		r, _ := measure(fmt.Sprintf("cancel with cascade of a job with %d dependents", dependents), cancel(hot, true))
		if r.Jobs[0].Status != store.StatusCancelled {
			t.Fatalf("hot parent %s", r.Jobs[0].Status)
		}
		h.status(store.StatusCancelled, long("zz-hot-child"))
		measure(fmt.Sprintf("retry reviving %d dependents", dependents), retryDeps(hot))
		h.status(store.StatusBlocked, long("zz-hot-child"))
	})

	// A prune_buckets visits at most its Limit buckets: one of Limit 1
	// writes what a small entry does however many buckets the state holds.
	t.Run("PruningIdleKeyBuckets", func(t *testing.T) {
		if fsm.ProtocolVersion < 3 {
			t.Skip("prune_buckets is protocol 3")
		}
		n := fsm.MaxPruneBuckets / raceScale
		h.ok(setLimits("rated", store.QueueLimits{KeyRate: store.Rate{Count: 1, Per: int64(time.Minute)}, KeyBurst: 1}))
		var batch []fsm.NewJob
		for i := range n {
			batch = append(batch, fsm.NewJob{Command: "x", Queue: "rated", ConcurrencyKey: fmt.Sprintf("tenant-%06d", i)})
			if len(batch) == maxBatchJobs || i == n-1 {
				h.submit(batch...)
				batch = batch[:0]
			}
		}
		for claimed := 0; claimed < n; {
			got := h.claim(fsm.Claim{WorkerID: "w", Queues: []string{"rated"}, Max: fsm.MaxClaim})
			if len(got) == 0 {
				t.Fatalf("claimed %d of %d", claimed, n)
			}
			claimed += len(got)
		}
		if got := h.f.KeyBuckets(); got != n {
			t.Fatalf("%d key buckets, want %d", got, n)
		}
		h.now = h.now.Add(time.Minute)
		r, one := measure(fmt.Sprintf("prune 1 of %d idle key buckets", n), fsm.Cmd{Op: fsm.OpPruneBuckets, PruneBuckets: &fsm.PruneBuckets{Limit: 1}})
		if r.Deleted != 1 || r.Next == nil {
			t.Fatalf("pruned %d, next %q, want 1 and more to come", r.Deleted, r.Next)
		}
		if one > first+4*4096 {
			t.Errorf("pruning one of %d buckets wrote %d bytes, a small submit %d", n, one, first)
		}
		r, _ = measure(fmt.Sprintf("prune the other %d idle key buckets", n-1), fsm.Cmd{Op: fsm.OpPruneBuckets, PruneBuckets: &fsm.PruneBuckets{After: r.Next, Limit: fsm.MaxPruneBuckets}})
		if r.Deleted != n-1 || h.f.KeyBuckets() != 0 {
			t.Fatalf("pruned %d, %d left, want %d and none", r.Deleted, h.f.KeyBuckets(), n-1)
		}
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

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// cpuTime is the CPU time this process has used: a measure of an apply's
// cost that a busy machine inflates less than the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
