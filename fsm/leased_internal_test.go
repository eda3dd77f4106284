package fsm

import (
	"math"
	"testing"

	"github.com/workron/workron/store"
)

// TestLeasedCountsLeasedJobsWithinTheBound: the size a rebuild makes
// leaseOf is the running and cancelling jobs of every queue, never more
// than the live jobs read, whatever the counts say (a count near the
// largest int does not wrap).
func TestLeasedCountsLeasedJobsWithinTheBound(t *testing.T) {
	counts := map[string]map[store.Status]int{
		"a": {store.StatusRunning: 3, store.StatusPending: 100, store.StatusDone: 1000},
		"b": {store.StatusCancelling: 2, store.StatusRunning: -5},
	}
	if got := leased(counts, 1000); got != 5 {
		t.Errorf("leased = %d, want 5 (3 running, 2 cancelling)", got)
	}
	if got := leased(counts, 4); got != 4 {
		t.Errorf("leased within 4 = %d, want 4", got)
	}
	counts["c"] = map[store.Status]int{store.StatusRunning: math.MaxInt}
	if got := leased(counts, 7); got != 7 {
		t.Errorf("leased with a count of MaxInt within 7 = %d, want 7", got)
	}
}
