package raftnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// removedMarker is the file in the data directory that records that this
// node was removed from its cluster, so it still says so after a restart
// (and does not ask to join again).
const removedMarker = "removed"

// membership tracks whether this node is still a member of its cluster.
//
// A node learns that it was removed from the configuration entry that
// removes it: the leader sends it that entry, then stops talking to it.
// Raft keeps the removed node running as a follower that holds no
// elections (Config.ShutdownOnRemove is off), so it can say what happened.
type membership struct {
	removed atomic.Bool
	// changing serializes this node's configuration changes (AddVoter,
	// AddNonvoter, Promote, RemoveServer), so Promote's read of the
	// configuration still holds when its change is made: hashicorp/raft
	// offers no configuration index to make the change conditional on.
	changing sync.Mutex
}

// Removed reports whether this node was removed from the cluster: it holds
// a configuration (a node that has not joined yet holds none: leaders send
// entries only to members), the latest one leaves it out, and it hears from
// no leader (a leader stops replicating to a node it removed). A joining
// node replays older configurations that leave it out, but hears from the
// leader meanwhile; should that leader fail mid-way, the node counts as
// removed until the next leader's entries add it again. A node removed
// while it was down does not learn it. It stays removed across restarts (a
// file in the data directory records it) until the cluster adds it again.
func (n *Node) Removed() bool { return n.member.removed.Load() }

// loadRemoved reads the marker a previous run left; call before Raft starts.
func (n *Node) loadRemoved() {
	if _, err := os.Stat(filepath.Join(n.cfg.DataDir, removedMarker)); err == nil {
		n.member.removed.Store(true)
		n.logger.Warn("this node was removed from its cluster (the data directory says so): " +
			"it answers 503 removed; to add it again, empty its data directory and start it with --join")
	}
}

// watchMembership checks the membership every half heartbeat timeout until
// the node shuts down.
func (n *Node) watchMembership() {
	defer close(n.memberDone)
	t := time.NewTicker(max(n.cfg.HeartbeatTimeout/2, 10*time.Millisecond))
	defer t.Stop()
	for {
		n.checkMembership()
		select {
		case <-n.shutdownCh:
			return
		case <-t.C:
		}
	}
}

// checkMembership updates the membership from Raft's latest configuration.
func (n *Node) checkMembership() {
	servers := n.raft.GetConfiguration().Configuration().Servers
	member := false
	for _, s := range servers {
		member = member || s.ID == raft.ServerID(n.cfg.ID)
	}
	leader, _ := n.Leader()
	marker := filepath.Join(n.cfg.DataDir, removedMarker)
	switch {
	case member:
		if leader != "" && n.member.removed.Load() {
			n.member.removed.Store(false)
			if err := os.Remove(marker); err != nil && !errors.Is(err, os.ErrNotExist) {
				n.logger.Error("remove the removed-node marker", "err", err)
			}
			n.logger.Info("this node was added to the cluster again")
		}
	case len(servers) > 0 && leader == "" && !n.member.removed.Load():
		n.member.removed.Store(true)
		if err := os.WriteFile(marker, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o600); err != nil {
			n.logger.Error("record the removal in the data directory", "err", err)
		}
		n.logger.Warn("this node was removed from the cluster: it answers 503 removed until it is stopped; " +
			"to add it again, empty its data directory and start it with --join")
	}
}

// TransferLeadership hands leadership to the most up-to-date other voter
// and returns once this node has stepped down. ErrNotLeader if this node
// does not lead; on ctx's end the transfer may still complete.
func (n *Node) TransferLeadership(ctx context.Context) error {
	if err := wait(ctx, n.raft.LeadershipTransfer()); err != nil {
		return fmt.Errorf("transfer leadership: %w", mapMembershipError(err))
	}
	return nil
}

// AddNonvoter adds a member that receives the log but does not vote, the
// way a joining node starts: it counts for no majority until it holds the
// state, and Promote makes it a voter then. A member that is a voter
// already stays one (only its address changes, if it differs). Leader
// only: ErrNotLeader otherwise.
func (n *Node) AddNonvoter(ctx context.Context, id, addr string) error {
	n.member.changing.Lock()
	defer n.member.changing.Unlock()
	if err := wait(ctx, n.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), 0, 0)); err != nil {
		return fmt.Errorf("add non-voter %s at %s: %w", id, addr, mapMembershipError(err))
	}
	return nil
}

// Promote makes the non-voter id a voter, at the address the configuration
// holds for it. The configuration is read and changed under the lock every
// configuration change of this node takes, so a join that re-addresses id
// or a removal of id meanwhile is not undone. A voter is left as it is; a
// node that is not a member is ErrNotMember. Leader only: ErrNotLeader
// otherwise.
func (n *Node) Promote(ctx context.Context, id string) error {
	n.member.changing.Lock()
	defer n.member.changing.Unlock()
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("promote %s: get configuration: %w", id, err)
	}
	for _, s := range f.Configuration().Servers {
		switch {
		case s.ID != raft.ServerID(id):
			continue
		case s.Suffrage == raft.Voter:
			return nil
		}
		if err := wait(ctx, n.raft.AddVoter(s.ID, s.Address, 0, 0)); err != nil {
			return fmt.Errorf("promote %s at %s: %w", id, s.Address, mapMembershipError(err))
		}
		return nil
	}
	return fmt.Errorf("promote %s: %w", id, ErrNotMember)
}
