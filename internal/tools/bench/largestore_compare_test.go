package bench

import (
	"strings"
	"testing"
)

// TestStoreComparisonFigures checks how large_store sums up its rounds:
// each store's figure is its median round, the ratio is the median of the
// rounds' own ratios (not the ratio of the medians), and a failed round
// makes both figures and the ratio fail.
func TestStoreComparisonFigures(t *testing.T) {
	empty := []Figure{
		{Figure: "e0", Value: 100, Unit: "jobs/s", Correct: true},
		{Figure: "e1", Value: 200, Unit: "jobs/s", Correct: true},
		{Figure: "e2", Value: 50, Unit: "jobs/s", Correct: true},
	}
	full := []Figure{
		{Figure: "f0", Value: 90, Unit: "jobs/s", Correct: true},  // 90 %
		{Figure: "f1", Value: 100, Unit: "jobs/s", Correct: true}, // 50 %
		{Figure: "f2", Value: 60, Unit: "jobs/s", Correct: true},  // 120 %
	}
	if got := medianFigure("large_store_submit_empty", empty); got.Value != 100 || got.Figure != "large_store_submit_empty" || !got.Correct {
		t.Errorf("median of the empty rounds = %+v, want the round of 100 named large_store_submit_empty", got)
	}
	r := ratioFigure("large_store_submit", empty, full)
	if r.Figure != "large_store_submit_vs_empty" || r.Unit != "%" || r.Value != 90 || !r.Correct {
		t.Errorf("ratio = %s %v %s (correct %v), want large_store_submit_vs_empty 90 %%", r.Figure, r.Value, r.Unit, r.Correct)
	}
	if !strings.Contains(r.Note, "60 / 50 = 120 %") {
		t.Errorf("ratio note %q does not give each round", r.Note)
	}

	full[2].Correct, full[2].Problems = false, "job x reported done 2 times"
	if got := medianFigure("large_store_submit", full); got.Correct || !strings.Contains(got.Problems, "f2: job x reported done 2 times") {
		t.Errorf("median with a failed round: correct %v, problems %q; want it failed, naming the round", got.Correct, got.Problems)
	}
	if r := ratioFigure("large_store_submit", empty, full); r.Correct || r.Problems == "" {
		t.Errorf("ratio with a failed round: correct %v, problems %q; want it failed", r.Correct, r.Problems)
	}
}
