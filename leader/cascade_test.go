//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package leader

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/internal/testkit/poll"
	"github.com/workron/workron/store"
)

func TestCascader(t *testing.T) {
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	setup := func(t *testing.T, n int) (*env, *Cascader) {
		e := newEnv(t, start)
		cfg := DefaultCascaderConfig()
		cfg.Proposer, cfg.State = e, e.f
		c, err := NewCascader(cfg)
		if err != nil {
			t.Fatal(err)
		}
		jobs := []fsm.NewJob{{Command: "x"}}
		for i := 1; i < n; i++ {
			jobs = append(jobs, fsm.NewJob{Command: "x", DependsOn: []string{"$0"}})
		}
		e.propose(fsm.Cmd{Op: fsm.OpSubmit, Submit: &fsm.Submit{Jobs: jobs}})
		return e, c
	}
	cancelled := func(t *testing.T, e *env, n int) int {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("job-%d", i+1)
		}
		jobs, err := e.f.Jobs(ids)
		if err != nil {
			t.Fatal(err)
		}
		c := 0
		for _, j := range jobs {
			if j.Status == store.StatusCancelled {
				c++
			}
		}
		return c
	}

	t.Run("ProposesOneChunkAPassUntilTheCascadeIsDone", func(t *testing.T) {
		const n = 2500
		e, c := setup(t, n)
		e.propose(fsm.Cmd{Op: fsm.OpCancelChunked, Cancel: &fsm.Cancel{JobID: "job-1", Cascade: true}})
		first := cancelled(t, e, n)
		if first != 1+fsm.CascadeChunk {
			t.Fatalf("the cancel's entry cancelled %d, want %d", first, 1+fsm.CascadeChunk)
		}
		before := e.proposals()
		if !c.runOnce(context.Background()) {
			t.Fatal("runOnce proposed nothing with a cascade under way")
		}
		if got := e.proposals() - before; got != 1 {
			t.Fatalf("runOnce proposed %d commands, want 1", got)
		}
		if got := cancelled(t, e, n); got != first+fsm.CascadeChunk {
			t.Fatalf("after one pass %d cancelled, want %d", got, first+fsm.CascadeChunk)
		}
		for c.runOnce(context.Background()) {
		}
		if got := cancelled(t, e, n); got != n {
			t.Fatalf("after the passes %d cancelled, want %d", got, n)
		}
		if len(e.f.Cascades(1)) != 0 {
			t.Fatal("a cascade is still under way")
		}
	})

	t.Run("ProposesNothingWithNoCascadeUnderWay", func(t *testing.T) {
		e, c := setup(t, 3)
		before := e.proposals()
		if c.runOnce(context.Background()) || e.proposals() != before {
			t.Fatal("runOnce proposed with no cascade under way")
		}
	})

	t.Run("ANewLeadersLoopResumesTheCascade", func(t *testing.T) {
		const n = 1500
		e, _ := setup(t, n)
		e.propose(fsm.Cmd{Op: fsm.OpCancelChunked, Cancel: &fsm.Cancel{JobID: "job-1", Cascade: true}})
		cfg := DefaultCascaderConfig()
		cfg.Interval, cfg.Proposer, cfg.State = time.Millisecond, e, e.f
		next, err := NewCascader(cfg)
		if err != nil {
			t.Fatal(err)
		}
		next.Start(context.Background())
		defer next.Stop()
		poll.Wait(t, 10*time.Second, time.Millisecond, func() error {
			if cs := e.f.Cascades(1); len(cs) > 0 {
				return fmt.Errorf("cascade %d under way, %d changed", cs[0].ID, cs[0].Changed)
			}
			return nil
		})
		next.Stop()
		if got := cancelled(t, e, n); got != n {
			t.Fatalf("%d cancelled, want %d", got, n)
		}
	})
}
