package raftnode

import (
	"sync"

	"github.com/hashicorp/raft"
)

// signal is a broadcast of "something changed": wait returns a channel that
// the next fire closes.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func (s *signal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

func (s *signal) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// watchLeader registers a Raft observer of leader changes (an election won
// or a new leader heard of, by this node) and fires n.leaderChanged for
// each until the node shuts down (and once more then).
func (n *Node) watchLeader() {
	obs := make(chan raft.Observation, 16)
	o := raft.NewObserver(obs, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(o)
	go func() {
		defer close(n.watchDone)
		defer n.raft.DeregisterObserver(o)
		for {
			select {
			case <-obs:
				n.leaderChanged.fire()
			case <-n.shutdownCh:
				n.leaderChanged.fire()
				return
			}
		}
	}()
}

// LeaderChanged returns a channel closed the next time the leader this node
// knows of changes (to another node, to none, or to this one) or the node
// shuts down. Read Leader or IsLeader after it closes, and call again for
// the next change.
func (n *Node) LeaderChanged() <-chan struct{} { return n.leaderChanged.wait() }
