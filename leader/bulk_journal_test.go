//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package leader

import (
	"context"
	"fmt"
	"testing"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// journalState is a BulkerState of finished jobs with journals of given
// sizes, newest first.
type journalState struct {
	jobs  []*store.Job
	steps map[string]int
}

func (s *journalState) Bulks() []*store.Bulk { return nil }
func (s *journalState) ListJobs(q store.ListQuery) ([]*store.Job, uint64, error) {
	return s.jobs, 0, nil
}
func (s *journalState) Journal(id string) (store.JournalTotals, error) {
	return store.JournalTotals{Steps: s.steps[id]}, nil
}

// stepCatcher is a Proposer that keeps the bulk steps proposed.
type stepCatcher struct{ steps []*fsm.BulkStep }

func (p *stepCatcher) Propose(_ context.Context, cmd fsm.Cmd) (fsm.Result, error) {
	if cmd.BulkStep != nil {
		p.steps = append(p.steps, cmd.BulkStep)
	}
	return fsm.Result{}, nil
}

// TestBulkDeleteCutsAtJournals: a bulk delete's step names jobs only until
// their journals of durable steps reach fsm.MaxDeleteStepKeys (always at
// least one job), since each step of a journal is a key its apply deletes;
// other actions are cut by their ids alone.
func TestBulkDeleteCutsAtJournals(t *testing.T) {
	budget := fsm.MaxDeleteStepKeys()
	st := &journalState{steps: map[string]int{}}
	for i := 10; i > 0; i-- {
		id := fmt.Sprintf("job-%d", i)
		st.jobs = append(st.jobs, &store.Job{ID: id, Seq: uint64(i), Status: store.StatusDone})
		st.steps[id] = budget / 3
	}
	for _, tc := range []struct {
		action string
		want   int
	}{{fsm.BulkDelete, 3}, {fsm.BulkCancel, 10}} {
		p := &stepCatcher{}
		cfg := DefaultBulkerConfig()
		cfg.Proposer, cfg.State, cfg.Compile = p, st, statusOnly
		bk, err := NewBulker(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !bk.step(context.Background(), &store.Bulk{ID: 1, Action: tc.action, Cursor: 100, State: store.BulkRunning}) {
			t.Fatalf("%s: no step proposed", tc.action)
		}
		got := p.steps[0]
		if len(got.IDs) != tc.want {
			t.Errorf("%s: a step named %d jobs of journals of %d steps each, want %d", tc.action, len(got.IDs), budget/3, tc.want)
		}
		if tc.want < len(st.jobs) && got.Next != st.jobs[tc.want-1].Seq {
			t.Errorf("%s: the walk goes on below seq %d, want %d (the last job named)", tc.action, got.Next, st.jobs[tc.want-1].Seq)
		}
	}
	// One job whose journal alone passes the budget is still deleted.
	st.steps["job-10"] = budget + 1
	p := &stepCatcher{}
	cfg := DefaultBulkerConfig()
	cfg.Proposer, cfg.State, cfg.Compile = p, st, statusOnly
	bk, _ := NewBulker(cfg)
	bk.step(context.Background(), &store.Bulk{ID: 1, Action: fsm.BulkDelete, Cursor: 100, State: store.BulkRunning})
	if len(p.steps) != 1 || len(p.steps[0].IDs) != 1 {
		t.Errorf("a job with a journal past the budget: steps %+v, want one naming it alone", p.steps)
	}
}
