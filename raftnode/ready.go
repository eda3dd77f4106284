package raftnode

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// leaderReady records the term in which this node's leadership Barrier
// completed. Until it has, the node leads but its state machine may still
// lack entries that earlier leaders committed and acknowledged (a node that
// restarted and won the election applies its log tail only once its term's
// first entry commits), so its state must not answer reads as the leader's.
type leaderReady struct {
	mu   sync.Mutex
	term uint64
	ch   chan struct{} // closed and replaced when term changes
}

func (r *leaderReady) set(term uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.term = term
	if r.ch != nil {
		close(r.ch)
	}
	r.ch = make(chan struct{})
}

func (r *leaderReady) get() (uint64, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ch == nil {
		r.ch = make(chan struct{})
	}
	return r.term, r.ch
}

// waitLeaderReady waits until this node leads and its state machine has
// applied every entry committed before its term (its leadership Barrier
// completed). ErrNotLeader if it does not lead, or ctx ends first.
func (n *Node) waitLeaderReady(ctx context.Context) error {
	for {
		term, changed := n.ready.get()
		if n.raft.State() != raft.Leader {
			return ErrNotLeader
		}
		if term == n.raft.CurrentTerm() {
			return nil
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: still applying the log after the election: %w", ErrNotLeader, ctx.Err())
		}
		t.Stop()
	}
}
