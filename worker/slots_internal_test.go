package worker

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/workron/workron/internal/testkit/poll"
)

// Once a slot is free while other jobs run, the claim loop waits up to its
// gather time for more to free, so that jobs ending together share one
// claim; it does not wait when every slot is free.
func TestWaitForSlotsGathersEndingJobs(t *testing.T) {
	// setup returns a worker with 4 slots, n of them running a job, and
	// the claim loop's timer.
	setup := func(t *testing.T, gather time.Duration, n int) (*Worker, []*task, *time.Timer) {
		w := &Worker{cfg: Config{Concurrency: 4}, running: map[string]*task{}, slotFreed: make(chan struct{}, 1), gather: gather}
		var tasks []*task
		for i := range n {
			tk := &task{}
			tk.job.ID = strconv.Itoa(i)
			w.running[tk.job.ID] = tk
			tasks = append(tasks, tk)
		}
		timer := time.NewTimer(gather)
		timer.Stop()
		t.Cleanup(func() { timer.Stop() })
		return w, tasks, timer
	}

	t.Run("JobsEndingTogetherShareOneClaim", func(t *testing.T) {
		w, tasks, timer := setup(t, time.Hour, 4)
		w.finish(tasks[0])
		got := make(chan int, 1)
		go func() {
			free, _ := w.waitForSlots(t.Context(), timer)
			got <- free
		}()
		// The waiter takes the first job's signal, then waits for more.
		err := poll.True(t.Context(), 10*time.Second, time.Millisecond, func() bool { return len(w.slotFreed) == 0 || len(got) > 0 })
		if err != nil {
			t.Fatal("the waiter neither took the signal of the freed slot nor returned")
		}
		select {
		case free := <-got:
			t.Fatalf("waitForSlots returned %d free slots while 3 of 4 jobs still ran", free)
		default:
		}
		for _, tk := range tasks[1:] {
			w.finish(tk)
		}
		if free := <-got; free != 4 {
			t.Fatalf("waitForSlots = %d free slots, want 4", free)
		}
	})

	t.Run("ClaimsTheFreeSlotsAfterTheGatherTime", func(t *testing.T) {
		w, tasks, timer := setup(t, time.Millisecond, 4)
		w.finish(tasks[0])
		if free, ok := w.waitForSlots(t.Context(), timer); free != 1 || !ok {
			t.Fatalf("waitForSlots = %d, %v; want 1 free slot", free, ok)
		}
	})

	t.Run("EverySlotFreeClaimsAtOnce", func(t *testing.T) {
		w, _, timer := setup(t, time.Hour, 0)
		if free, ok := w.waitForSlots(t.Context(), timer); free != 4 || !ok {
			t.Fatalf("waitForSlots = %d, %v; want 4 free slots", free, ok)
		}
	})

	t.Run("StopsWhenTheContextEnds", func(t *testing.T) {
		w, tasks, timer := setup(t, time.Hour, 4)
		w.finish(tasks[0])
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, ok := w.waitForSlots(ctx, timer); ok {
			t.Fatal("waitForSlots reported slots after its context ended")
		}
	})
}
