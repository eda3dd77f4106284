package leader

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

var errNeedsUpgrade = errors.New("needs upgrade")

// clusterAt proposes through env as a cluster running protocol does:
// refusing, as raftnode does, a command of a later protocol. It counts the
// prune_buckets it was asked for and those it applied.
type clusterAt struct {
	*env
	protocol        int
	asked, proposed int
}

func (c *clusterAt) Propose(ctx context.Context, cmd fsm.Cmd) (fsm.Result, error) {
	if cmd.Op == fsm.OpPruneBuckets {
		c.asked++
	}
	if cmd.Protocol() > c.protocol {
		return fsm.Result{}, errNeedsUpgrade
	}
	if cmd.Op == fsm.OpPruneBuckets {
		c.proposed++
	}
	return c.env.Propose(ctx, cmd)
}

func TestSweeperPrunesIdleKeyBuckets(t *testing.T) {
	e := newEnv(t, t0)
	e.propose(fsm.Cmd{Op: fsm.OpSetQueueLimits, QueueLimits: &fsm.SetQueueLimits{Name: "default",
		Limits: store.QueueLimits{KeyRate: store.Rate{Count: 1, Per: int64(time.Minute)}, KeyBurst: 1}}})
	var jobs []fsm.NewJob
	for i := range 5 {
		jobs = append(jobs, fsm.NewJob{Command: "x", Queue: "default", ConcurrencyKey: fmt.Sprint("k", i)})
	}
	e.propose(fsm.Cmd{Op: fsm.OpSubmit, Submit: &fsm.Submit{Jobs: jobs}})
	e.propose(fsm.Cmd{Op: fsm.OpClaim, Claim: &fsm.Claim{WorkerID: "w", Shell: true, Max: 10, LeaseTTL: int64(time.Hour)}})
	if n := e.f.KeyBuckets(); n != 5 {
		t.Fatalf("%d key buckets, want 5", n)
	}
	c := &clusterAt{env: e, protocol: 2}
	cfg := DefaultSweeperConfig()
	cfg.Proposer, cfg.State, cfg.Now = c, e.f, e.clock.Now
	w, err := NewSweeper(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.pruneBatch = 2
	ctx := context.Background()

	e.clock.Add(30 * time.Second)
	c.protocol = 3
	if n := w.prune(ctx); n != 0 || e.f.KeyBuckets() != 5 {
		t.Fatalf("pruned %d, %d left, before the buckets refilled", n, e.f.KeyBuckets())
	}
	e.clock.Add(time.Minute)
	c.protocol, c.asked, c.proposed = 2, 0, 0
	if n := w.prune(ctx); n != 0 || c.proposed != 0 || c.asked != 1 || e.f.KeyBuckets() != 5 {
		t.Fatalf("at protocol 2: pruned %d (%d asked, %d proposed), %d left; want one refused ask and all kept", n, c.asked, c.proposed, e.f.KeyBuckets())
	}
	c.protocol = 3
	if n := w.prune(ctx); n != 5 || e.f.KeyBuckets() != 0 {
		t.Fatalf("at protocol 3: pruned %d, %d left, want all 5", n, e.f.KeyBuckets())
	}
	if c.proposed != 3 { // pages of 2, 2 and 1 bucket
		t.Fatalf("%d prune_buckets proposed, want 3 (until one comes back short)", c.proposed)
	}
	if n := w.prune(ctx); n != 0 || c.proposed != 3 {
		t.Fatalf("with no bucket left: pruned %d, %d proposed in all, want none proposed", n, c.proposed)
	}
}
