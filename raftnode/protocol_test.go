package raftnode_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/raftnode"
)

// The proposer refuses a command that needs a newer protocol than the
// cluster runs, before anything reaches the log, and proposes the others of
// the same batch; once the cluster runs the command's protocol it proposes
// it.
func TestProposeGatesOnClusterProtocol(t *testing.T) {
	n, err := raftnode.Open(loneConfig(filepath.Join(t.TempDir(), "n1")))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	waitFor(t, 10*time.Second, leads(n))
	ctx := context.Background()
	retryDeps := fsm.Cmd{Op: fsm.OpRetryDependents, Retry: &fsm.Retry{JobID: "job-1", Dependents: true}}
	submit := fsm.Cmd{Op: fsm.OpSubmit, Submit: &fsm.Submit{Jobs: []fsm.NewJob{{Command: "a"}}}}
	if _, err := n.Propose(ctx, submit); err != nil { // the log's entries of the election are applied
		t.Fatal(err)
	}

	t.Run("RefusedUntilSet", func(t *testing.T) {
		if got := n.ClusterProtocol(); got != 1 {
			t.Fatalf("ClusterProtocol before any report = %d, want 1", got)
		}
		before := n.Stats().AppliedIndex
		_, err := n.Propose(ctx, retryDeps)
		var ue *raftnode.NeedsUpgradeError
		if !errors.Is(err, raftnode.ErrNeedsUpgrade) || !errors.As(err, &ue) || ue.Need != 2 || ue.Cluster != 1 || ue.Op != fsm.OpRetryDependents {
			t.Fatalf("retry_deps at protocol 1: %v, want a NeedsUpgradeError needing 2 of a cluster at 1", err)
		}
		if after := n.Stats().AppliedIndex; after != before {
			t.Fatalf("applied index went from %d to %d: a refused command reached the log", before, after)
		}
	})
	t.Run("OthersOfTheBatchStillApply", func(t *testing.T) {
		_, errs := n.ProposeAll(ctx, []fsm.Cmd{submit, retryDeps, submit})
		if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], raftnode.ErrNeedsUpgrade) {
			t.Fatalf("errors = %v, want only retry_deps refused", errs)
		}
	})
	t.Run("ProposedOnceEveryMemberRunsIt", func(t *testing.T) {
		n.SetClusterProtocol(2)
		if got := n.ClusterProtocol(); got != min(2, fsm.ProtocolVersion) {
			t.Fatalf("ClusterProtocol = %d after SetClusterProtocol(2)", got)
		}
		_, err := n.Propose(ctx, retryDeps)
		if !errors.Is(err, fsm.ErrConflict) { // job-1 is pending: applied, and refused by the FSM
			t.Fatalf("retry_deps at protocol 2: %v, want the FSM's ErrConflict", err)
		}
		n.SetClusterProtocol(99)
		if got := n.ClusterProtocol(); got != fsm.ProtocolVersion {
			t.Fatalf("ClusterProtocol = %d, want at most this binary's %d", got, fsm.ProtocolVersion)
		}
	})
}
