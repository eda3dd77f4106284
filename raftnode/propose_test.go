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
