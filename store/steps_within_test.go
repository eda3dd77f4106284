package store_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/workron/workron/store"
)

// TestStepsWithin: a listing with results stops at the count or before
// its results pass the byte budget, holds at least one step however large,
// says whether more follow, and goes on after the key given.
func TestStepsWithin(t *testing.T) {
	st := newTestStore(t)
	job := insertJobs(t, st, 1, store.StatusRunning)[0]
	update(t, st, func(tx *store.Tx) error {
		for i := range 6 {
			s := &store.Step{Key: fmt.Sprintf("s%d", i), Status: store.StepOK, Attempts: 1, Result: []byte(`"` + strings.Repeat("x", 98) + `"`)}
			if err := tx.PutStep(job.ID, s); err != nil {
				return err
			}
		}
		for _, c := range []struct {
			after  string
			limit  int
			budget int64
			keys   string
			more   bool
		}{
			{"", 10, 1000, "s0 s1 s2 s3 s4 s5", false},
			{"", 10, 250, "s0 s1", true}, // a third would pass 250 bytes
			{"", 10, 10, "s0", true},     // at least one step
			{"s3", 10, 1000, "s4 s5", false},
			{"s1", 2, 1000, "s2 s3", true}, // the count
			{"s5", 10, 1000, "", false},
		} {
			steps, more, err := tx.StepsWithin(job.ID, c.after, c.limit, c.budget)
			if err != nil {
				return err
			}
			var keys []string
			for _, s := range steps {
				if len(s.Result) != 100 || s.Size != 100 {
					t.Errorf("step %s: %d bytes of result, size %d; want 100", s.Key, len(s.Result), s.Size)
				}
				keys = append(keys, s.Key)
			}
			if got := strings.Join(keys, " "); got != c.keys || more != c.more {
				t.Errorf("after %q limit %d budget %d: %q more %v; want %q more %v", c.after, c.limit, c.budget, got, more, c.keys, c.more)
			}
		}
		return nil
	})
}
