package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// largeCompareRounds is how many turns compareStores measures each store.
const largeCompareRounds = 3

// storeComparison is what compareStores measured.
type storeComparison struct {
	figs                []Figure
	emptyJobs, fullJobs int // the jobs its rounds added to each store
}

// compareStores measures single submits (--clients clients, --jobs
// jobs) and claim_done on the empty store's cluster and on the full one
// in largeCompareRounds turns, the order swapped each round, so that both
// share the machine's load as it moves. Each store's figure is the round
// with the median value; the _vs_empty figure is the median of the
// rounds' ratios, with their range in the note.
func (b *bencher) compareStores(ctx context.Context, ec *procCluster, eb *bencher, fc *procCluster, fb *bencher) (storeComparison, error) {
	type store struct {
		c      *procCluster
		b      *bencher
		suffix string
		submit []Figure
		claim  []Figure
	}
	empty, full := &store{c: ec, b: eb, suffix: "_empty"}, &store{c: fc, b: fb}
	var out storeComparison
	for r := range largeCompareRounds {
		order := []*store{empty, full}
		if r%2 == 1 {
			order = []*store{full, empty}
		}
		for _, st := range order {
			li, _, err := st.c.leader(ctx, st.b)
			if err != nil {
				return out, err
			}
			leader := st.c.Nodes[li].URL
			sub := st.b.submitLoad(ctx, fmt.Sprintf("large_store_submit%s_%d", st.suffix, r), leader, leader, "leader", b.cfg.Jobs, 1, b.cfg.Clients)
			claim, err := st.c.withServerCPU(func() ([]Figure, error) {
				return st.b.claimDone(ctx, fmt.Sprintf("large_store_claim_done%s_%d", st.suffix, r), 1)
			})
			if err != nil {
				return out, err
			}
			st.submit, st.claim = append(st.submit, sub), append(st.claim, claim[0])
			n := sub.Jobs + claim[0].Jobs
			if st == empty {
				out.emptyJobs += n
			} else {
				out.fullJobs += n
			}
		}
	}
	for _, m := range []struct {
		name string
		of   func(*store) []Figure
	}{
		{"large_store_submit", func(s *store) []Figure { return s.submit }},
		{"large_store_claim_done", func(s *store) []Figure { return s.claim }},
	} {
		e, f := medianFigure(m.name+"_empty", m.of(empty)), medianFigure(m.name, m.of(full))
		out.figs = append(out.figs, e, f, ratioFigure(m.name, m.of(empty), m.of(full)))
	}
	return out, nil
}

// medianFigure is the figure of the round with the median value, named
// name, with every round's value in the note and every round's problems.
func medianFigure(name string, rounds []Figure) Figure {
	sorted := slices.Clone(rounds)
	slices.SortFunc(sorted, func(a, b Figure) int {
		switch {
		case a.Value < b.Value:
			return -1
		case a.Value > b.Value:
			return 1
		}
		return 0
	})
	fg := sorted[len(sorted)/2]
	fg.Figure = name
	var values, problems []string
	fg.Correct = true
	for _, r := range rounds {
		values = append(values, fmt.Sprintf("%.0f", r.Value))
		if !r.Correct {
			fg.Correct = false
			problems = append(problems, r.Figure+": "+r.Problems)
		}
	}
	fg.Problems = strings.Join(problems, "; ")
	fg.Note = fmt.Sprintf("median of %d rounds (%s %s, in the order run); the median round: %s", len(rounds), strings.Join(values, ", "), fg.Unit, fg.Note)
	return fg
}

// ratioFigure is the median over the rounds of the full store's value as
// a percentage of the empty store's in the same round, named NAME_vs_empty.
func ratioFigure(name string, empty, full []Figure) Figure {
	var ratios []float64
	var each []string
	correct := true
	for i := range min(len(empty), len(full)) {
		r := 0.0
		if empty[i].Value > 0 {
			r = 100 * full[i].Value / empty[i].Value
		}
		ratios = append(ratios, r)
		each = append(each, fmt.Sprintf("%.0f / %.0f = %.0f %%", full[i].Value, empty[i].Value, r))
		correct = correct && empty[i].Correct && full[i].Correct
	}
	fg := medianFigure(name, full)
	fg.Figure, fg.Unit = name+"_vs_empty", "%"
	slices.Sort(ratios)
	fg.Value = ratios[len(ratios)/2]
	fg.Note = fmt.Sprintf("%s on the full store as a percentage of the same on the empty store's cluster in the same round, the median of %d rounds: %s (full / empty)",
		strings.TrimPrefix(name, "large_store_"), len(ratios), strings.Join(each, "; "))
	fg.Correct, fg.Problems = correct, ""
	if !correct {
		fg.Problems = "see " + name + "_empty and " + name
	}
	return fg
}
