package raftnode_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/raftnode"
)

// The leader writes an entry to its own log while it replicates it (Raft
// thesis §10.2.1, the change third_party/raft makes): with the leader's
// write held, both followers still receive and store the entry, and the
// proposal is answered, applied, once the leader's write is done.
func TestLeaderReplicatesWhileItWrites(t *testing.T) {
	var (
		holding atomic.Bool
		once    sync.Once
		entered = make(chan struct{})
		release = make(chan struct{})
	)
	hold := func() {
		if holding.Load() {
			once.Do(func() {
				close(entered)
				<-release
			})
		}
	}
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	n1 := openNode(t, "n1", nil, func(c *raftnode.Config) { c.Bootstrap = true; c.BeforeLogWrite = hold })
	waitFor(t, 10*time.Second, leads(n1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	followers := []*raftnode.Node{openNode(t, "n2", nil, nil), openNode(t, "n3", nil, nil)}
	for i, f := range followers {
		if err := n1.AddVoter(ctx, fmt.Sprintf("n%d", i+2), f.RaftAddr()); err != nil {
			t.Fatal(err)
		}
	}

	// The next entry the leader writes: the proposal's, or one proposed
	// just before it, which the followers must receive all the same.
	target := n1.Stats().LastLogIndex + 1
	holding.Store(true)
	answered := make(chan error, 1)
	go func() {
		_, err := n1.Propose(ctx, fsm.Cmd{Op: fsm.OpSubmit, Submit: &fsm.Submit{Jobs: []fsm.NewJob{{Command: "held"}}}})
		answered <- err
	}()
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the leader never wrote the proposed entry")
	}
	for i, f := range followers {
		waitFor(t, 10*time.Second, func() error {
			if got := f.Stats().LastLogIndex; got < target {
				return fmt.Errorf("follower n%d stored up to %d while the leader writes %d", i+2, got, target)
			}
			return nil
		})
	}
	select {
	case err := <-answered:
		t.Fatalf("the proposal was answered (%v) before the leader's own write was done", err)
	default:
	}
	close(release)
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("propose: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the proposal was not answered after the leader's write")
	}
	if got := n1.Stats().AppliedIndex; got < target {
		t.Errorf("leader applied up to %d after answering, want %d", got, target)
	}
}
