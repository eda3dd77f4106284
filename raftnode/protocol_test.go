package raftnode_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/raftnode"
	"github.com/workron/workron/store"
)

// The proposer refuses a command that needs a newer protocol than a member
// of the configuration runs, before anything reaches the log, and proposes
// the others of the same batch; once every member is recorded at the
// command's protocol it proposes it.
func TestProposeGatesOnClusterProtocol(t *testing.T) {
	if fsm.ProtocolVersion < 2 {
		t.Skip("this binary is of protocol 1")
	}
	n1 := openNode(t, "n1", nil, func(c *raftnode.Config) { c.Bootstrap = true })
	waitFor(t, 10*time.Second, leads(n1))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	retryDeps := fsm.Cmd{Op: fsm.OpRetryDependents, Retry: &fsm.Retry{JobID: "job-1", Dependents: true}}
	submit := fsm.Cmd{Op: fsm.OpSubmit, Submit: &fsm.Submit{Jobs: []fsm.NewJob{{Command: "a"}}}}
	if _, err := n1.Propose(ctx, submit); err != nil {
		t.Fatal(err)
	}
	if got := n1.ClusterProtocol(); got != fsm.ProtocolVersion {
		t.Fatalf("a lone node's cluster protocol = %d, want its own %d", got, fsm.ProtocolVersion)
	}
	n2 := openNode(t, "n2", nil, nil)
	if err := n1.AddVoter(ctx, "n2", n2.RaftAddr()); err != nil {
		t.Fatal(err)
	}

	t.Run("AMemberNotRecordedYetIsWaitedFor", func(t *testing.T) {
		// Unknown is not old: n2 has not said which protocol it runs, so
		// a command of protocol 2 waits for it instead of being refused.
		if got := n1.ClusterProtocol(); got != fsm.ProtocolVersion {
			t.Fatalf("ClusterProtocol with n2 not recorded yet = %d, want %d (n2 not counted)", got, fsm.ProtocolVersion)
		}
		done := make(chan error, 1)
		go func() {
			_, err := n1.Propose(ctx, retryDeps)
			done <- err
		}()
		n1.SetMemberProtocols(map[string]int{"n2": fsm.ProtocolVersion})
		if err := <-done; !errors.Is(err, fsm.ErrConflict) { // job-1 is pending: applied, and refused by the FSM
			t.Fatalf("retry_deps while n2's protocol was not known yet: %v, want it applied (the FSM's ErrConflict)", err)
		}
		if got := n1.AwaitProtocol(ctx); got != fsm.ProtocolVersion {
			t.Fatalf("AwaitProtocol = %d, want %d", got, fsm.ProtocolVersion)
		}
	})
	t.Run("AMemberAtProtocol1", func(t *testing.T) {
		n1.SetMemberProtocols(map[string]int{"n2": 1})
		if got := n1.ClusterProtocol(); got != 1 {
			t.Fatalf("ClusterProtocol with n2 at 1 = %d, want 1", got)
		}
		before := n1.Stats().LastLogIndex
		_, err := n1.Propose(ctx, retryDeps)
		var ue *raftnode.NeedsUpgradeError
		if !errors.Is(err, raftnode.ErrNeedsUpgrade) || !errors.As(err, &ue) || ue.Need != 2 || ue.Cluster != 1 || ue.Op != fsm.OpRetryDependents {
			t.Fatalf("retry_deps at protocol 1: %v, want a NeedsUpgradeError needing 2 of a cluster at 1", err)
		}
		if after := n1.Stats().LastLogIndex; after != before {
			t.Fatalf("last log index went from %d to %d: a refused command reached the log", before, after)
		}
	})
	t.Run("OthersOfTheBatchStillApply", func(t *testing.T) {
		_, errs := n1.ProposeAll(ctx, []fsm.Cmd{submit, retryDeps, submit})
		if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], raftnode.ErrNeedsUpgrade) {
			t.Fatalf("errors = %v, want only retry_deps refused", errs)
		}
	})
	t.Run("AGroupIsRefusedWhole", func(t *testing.T) {
		before := n1.Stats().LastLogIndex
		if _, err := n1.ProposeTogether(ctx, []fsm.Cmd{submit, retryDeps}); !errors.Is(err, raftnode.ErrNeedsUpgrade) {
			t.Fatalf("a group holding retry_deps at protocol 1: %v, want ErrNeedsUpgrade", err)
		}
		if after := n1.Stats().LastLogIndex; after != before {
			t.Fatalf("last log index went from %d to %d: part of a refused group reached the log", before, after)
		}
	})
	t.Run("ProposedOnceEveryMemberRunsIt", func(t *testing.T) {
		n1.SetMemberProtocols(map[string]int{"n2": 2})
		if got := n1.ClusterProtocol(); got != 2 {
			t.Fatalf("ClusterProtocol = %d with n2 at 2", got)
		}
		_, err := n1.Propose(ctx, retryDeps)
		if !errors.Is(err, fsm.ErrConflict) { // job-1 is pending: applied, and refused by the FSM
			t.Fatalf("retry_deps at protocol 2: %v, want the FSM's ErrConflict", err)
		}
		if fsm.ProtocolVersion >= 3 {
			// Flow control's fields of protocol 3 wait for every member.
			for _, c := range []fsm.Cmd{
				{Op: fsm.OpClaim, Claim: &fsm.Claim{WorkerID: "w", LeaseTTL: 1, Fair: true}},
				{Op: fsm.OpReport, Report: &fsm.Report{JobID: "job-1", RateLimitedFor: 1}},
				{Op: fsm.OpReport, Report: &fsm.Report{JobID: "job-1", SnoozeFor: 1}},
				{Op: fsm.OpSetQueueLimits, QueueLimits: &fsm.SetQueueLimits{Name: "q", Limits: store.QueueLimits{KeyWeights: map[string]int{"a": 2}}}},
			} {
				var ue *raftnode.NeedsUpgradeError
				if _, err := n1.Propose(ctx, c); !errors.As(err, &ue) || ue.Need != 3 || ue.Cluster != 2 {
					t.Errorf("%s of protocol 3 in a cluster at 2: %v, want a NeedsUpgradeError", c.Op, err)
				}
			}
		}
		n1.SetMemberProtocols(map[string]int{"n2": 99})
		if got := n1.ClusterProtocol(); got != fsm.ProtocolVersion {
			t.Fatalf("ClusterProtocol = %d, want at most this binary's %d", got, fsm.ProtocolVersion)
		}
	})
	t.Run("ARemovedMemberNoLongerCounts", func(t *testing.T) {
		n1.SetMemberProtocols(map[string]int{"n2": 1})
		if got := n1.ClusterProtocol(); got != 1 {
			t.Fatalf("ClusterProtocol = %d with n2 at 1", got)
		}
		if err := n1.RemoveServer(ctx, "n2"); err != nil {
			t.Fatal(err)
		}
		if got := n1.ClusterProtocol(); got != fsm.ProtocolVersion {
			t.Fatalf("ClusterProtocol = %d after n2 left, want %d", got, fsm.ProtocolVersion)
		}
	})
}

// A member never heard from holds back a command above protocol 1 for
// Config.ProtocolWait at most; then it counts as protocol 1, and the
// command is refused, nothing done.
func TestProposeWaitsForAnUnknownMemberBoundedly(t *testing.T) {
	if fsm.ProtocolVersion < 2 {
		t.Skip("this binary is of protocol 1")
	}
	n1 := openNode(t, "n1", nil, func(c *raftnode.Config) { c.Bootstrap, c.ProtocolWait = true, 200*time.Millisecond })
	waitFor(t, 10*time.Second, leads(n1))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n2 := openNode(t, "n2", nil, nil)
	if err := n1.AddVoter(ctx, "n2", n2.RaftAddr()); err != nil {
		t.Fatal(err)
	}
	if got := n1.AwaitProtocol(ctx); got != 1 {
		t.Fatalf("AwaitProtocol with n2 never heard from = %d, want 1 once ProtocolWait is over", got)
	}
	retryDeps := fsm.Cmd{Op: fsm.OpRetryDependents, Retry: &fsm.Retry{JobID: "job-1", Dependents: true}}
	var ue *raftnode.NeedsUpgradeError
	if _, err := n1.Propose(ctx, retryDeps); !errors.As(err, &ue) || ue.Cluster != 1 {
		t.Fatalf("retry_deps with n2 never heard from: %v, want a NeedsUpgradeError of a cluster at 1", err)
	}
	submit := fsm.Cmd{Op: fsm.OpSubmit, Submit: &fsm.Submit{Jobs: []fsm.NewJob{{Command: "a"}}}}
	if _, err := n1.Propose(ctx, submit); err != nil {
		t.Fatalf("a submit of protocol 1: %v", err)
	}
}

// What the members said outlives a restart of this node: restarted while
// a member is down, it knows that member's protocol at once instead of
// waiting for it and then counting it as protocol 1.
func TestMemberProtocolsOutliveARestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "n1")
	n1 := openNode(t, "n1", nil, func(c *raftnode.Config) { c.Bootstrap, c.DataDir = true, dir })
	waitFor(t, 10*time.Second, leads(n1))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n2 := openNode(t, "n2", nil, nil)
	if err := n1.AddVoter(ctx, "n2", n2.RaftAddr()); err != nil {
		t.Fatal(err)
	}
	n1.SetMemberProtocols(map[string]int{"n2": fsm.ProtocolVersion})
	if err := n1.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := n2.Shutdown(); err != nil {
		t.Fatal(err)
	}
	again := openNode(t, "n1", nil, func(c *raftnode.Config) { c.DataDir, c.ProtocolWait = dir, time.Minute })
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	if got := again.AwaitProtocol(short); got != fsm.ProtocolVersion || short.Err() != nil {
		t.Fatalf("AwaitProtocol after a restart with n2 down = %d (waited: %v), want n2's recorded %d at once",
			got, short.Err(), fsm.ProtocolVersion)
	}
}
