package raftnode_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/raftnode"
	"github.com/workron/workron/store"
)

// ProposeAll answers each command as Propose would, in order: applied
// commands with their results, a command the FSM refuses with its error,
// and none of them on a node that does not lead.
func TestProposeAll(t *testing.T) {
	n, err := raftnode.Open(loneConfig(filepath.Join(t.TempDir(), "n1")))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, leads(n))
	ctx := context.Background()

	cmds := []fsm.Cmd{
		{Op: fsm.OpSubmit, Submit: &fsm.Submit{Jobs: []fsm.NewJob{{Command: "a"}}}},
		{Op: fsm.OpCancel, Cancel: &fsm.Cancel{JobID: "job-404"}},
		{Op: fsm.OpRegister, Register: &fsm.Register{Worker: store.Worker{ID: "w1"}}},
		{Op: fsm.OpSubmit, Submit: &fsm.Submit{Jobs: []fsm.NewJob{{Command: "b"}}}},
	}
	results, errs := n.ProposeAll(ctx, cmds)
	if len(results) != 4 || len(errs) != 4 {
		t.Fatalf("%d results and %d errors for 4 commands", len(results), len(errs))
	}
	if errs[0] != nil || errs[2] != nil || errs[3] != nil {
		t.Fatalf("errors = %v, want only the cancel's", errs)
	}
	if !errors.Is(errs[1], fsm.ErrNotFound) || !errors.Is(results[1].Err, fsm.ErrNotFound) {
		t.Fatalf("cancel of an unknown job: %v / %v, want ErrNotFound in both", errs[1], results[1].Err)
	}
	if a, b := results[0].Jobs[0], results[3].Jobs[0]; a.Command != "a" || b.Command != "b" || a.Seq >= b.Seq {
		t.Fatalf("submits answered %s (seq %d) and %s (seq %d), want a then b", a.Command, a.Seq, b.Command, b.Seq)
	}

	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	_, errs = n.ProposeAll(ctx, cmds[:2])
	for i, err := range errs {
		if !errors.Is(err, raftnode.ErrNotLeader) {
			t.Errorf("command %d on a stopped node: %v, want ErrNotLeader", i, err)
		}
	}
}

// ProposeTogether puts its commands in one log entry, in order: a submit
// and a claim proposed together lease the job in the entry that creates
// it, and the entry counts once. Each command is still decided on its own,
// and a group whose command needs a newer protocol is refused whole.
func TestProposeTogether(t *testing.T) {
	n, err := raftnode.Open(loneConfig(filepath.Join(t.TempDir(), "n1")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Shutdown() })
	waitFor(t, 10*time.Second, leads(n))
	ctx := context.Background()
	submit := func(queue string) fsm.Cmd {
		return fsm.Cmd{Op: fsm.OpSubmit, Submit: &fsm.Submit{Jobs: []fsm.NewJob{{Command: "a", Queue: queue, MaxAttempts: 1}}}}
	}
	claim := fsm.Cmd{Op: fsm.OpClaim, Claim: &fsm.Claim{WorkerID: "w1", Queues: []string{"q"}, Shell: true, Max: 1, LeaseTTL: int64(time.Minute)}}

	t.Run("SubmitAndClaimInOneEntry", func(t *testing.T) {
		before := n.Stats().Entries
		res, err := n.ProposeTogether(ctx, []fsm.Cmd{submit("q"), claim})
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 2 || res[0].Err != nil || res[1].Err != nil || len(res[1].Jobs) != 1 {
			t.Fatalf("results %+v, want the submit's job and the claim's", res)
		}
		made, got := res[0].Jobs[0], res[1].Jobs[0]
		if got.ID != made.ID || got.Status != store.StatusRunning || got.WorkerID != "w1" {
			t.Fatalf("claim got %s (%s, worker %q), want the job %s just submitted, running on w1", got.ID, got.Status, got.WorkerID, made.ID)
		}
		if made.ModifyIndex != got.ModifyIndex {
			t.Fatalf("submitted at index %d, claimed at index %d: want one entry", made.ModifyIndex, got.ModifyIndex)
		}
		if d := n.Stats().Entries - before; d != 1 {
			t.Fatalf("%d entries proposed for the group, want 1", d)
		}
	})
	t.Run("TheClaimIsDecidedAfterTheSubmit", func(t *testing.T) {
		res, err := n.ProposeTogether(ctx, []fsm.Cmd{submit("other"), claim})
		if err != nil {
			t.Fatal(err)
		}
		if len(res[0].Jobs) != 1 || len(res[1].Jobs) != 0 {
			t.Fatalf("a claim of queue q beside a submit to queue other got %d jobs, want none", len(res[1].Jobs))
		}
	})
	t.Run("TooLarge", func(t *testing.T) {
		cmds := make([]fsm.Cmd, raftnode.DefaultConfig().MaxBatch+1)
		for i := range cmds {
			cmds[i] = submit("q")
		}
		if _, err := n.ProposeTogether(ctx, cmds); !errors.Is(err, raftnode.ErrNotCommitted) {
			t.Fatalf("a group over MaxBatch: %v, want ErrNotCommitted", err)
		}
	})
}

// On a cluster of two, the leader's stage histograms see every stage of
// the entries it proposes, the replication included (AppendEntries round
// trips, answered through the transport's pipeline or not), and the
// follower times its own log writes but traces none.
func TestStagesOnACluster(t *testing.T) {
	n1 := openNode(t, "n1", nil, func(c *raftnode.Config) { c.Bootstrap = true })
	waitFor(t, 10*time.Second, leads(n1))
	n2 := openNode(t, "n2", nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n1.AddVoter(ctx, "n2", n2.RaftAddr()); err != nil {
		t.Fatal(err)
	}
	const submits = 20
	for range submits {
		if _, err := n1.Propose(ctx, fsm.Cmd{Op: fsm.OpSubmit, Submit: &fsm.Submit{Jobs: []fsm.NewJob{{Command: "a"}}}}); err != nil {
			t.Fatal(err)
		}
	}
	st := n1.Stats().Stages
	for _, name := range raftnode.StageNames() {
		if h := st.Stages[name]; h.Count < submits {
			t.Errorf("leader's stage %s: %d observations, want at least %d", name, h.Count, submits)
		}
	}
	if h := st.Stages["replicate"]; h.Sum <= 0 {
		t.Errorf("leader's replicate stage sums to %v, want above 0 with a follower", h.Sum)
	}
	if st.AppendRPC.Count < submits {
		t.Errorf("%d AppendEntries round trips timed, want at least %d", st.AppendRPC.Count, submits)
	}
	waitFor(t, 10*time.Second, func() error {
		if got, want := n2.Stats().AppliedIndex, n1.Stats().AppliedIndex; got < want {
			return fmt.Errorf("follower applied %d of %d", got, want)
		}
		return nil
	})
	fs := n2.Stats().Stages
	if fs.LogWrite.Count == 0 || fs.Stages["apply"].Count != 0 {
		t.Errorf("follower: %d log writes timed, %d applies traced; want some, and none", fs.LogWrite.Count, fs.Stages["apply"].Count)
	}
}
