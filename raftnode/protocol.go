package raftnode

import (
	"fmt"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/workron/workron/fsm"
)

// NeedsUpgradeError is the error of a command that needs a newer protocol
// than the cluster runs (see Node.SetMemberProtocols): it was not proposed,
// nothing was done. It matches ErrNeedsUpgrade.
type NeedsUpgradeError struct {
	Op      fsm.Op
	Need    int // the command's protocol (fsm.Cmd.Protocol)
	Cluster int // the cluster's protocol when it was refused
}

func (e *NeedsUpgradeError) Error() string {
	return fmt.Sprintf("raftnode: %s needs protocol %d, and the cluster runs %d until every node runs protocol %d: not proposed",
		e.Op, e.Need, e.Cluster, e.Need)
}

// Is makes errors.Is(err, ErrNeedsUpgrade) hold.
func (e *NeedsUpgradeError) Is(target error) bool { return target == ErrNeedsUpgrade }

// memberProtocols is what each member of the cluster reported (see
// SetMemberProtocols).
type memberProtocols struct {
	m atomic.Pointer[map[string]int]
}

// SetMemberProtocols records the protocol version (fsm.ProtocolVersion of
// its binary) that each member reported, by member id; it replaces what
// was recorded before. The cluster's protocol is the lowest of the members
// of the current Raft configuration, this node's own binary included, and
// a member without a record (or one below 1) runs protocol 1; so a member
// that joins counts as 1 from the moment it is in the configuration until
// it is recorded. The proposer refuses, with *NeedsUpgradeError, every
// command whose fsm.Cmd.Protocol is higher, so no member is sent an entry
// it cannot apply.
func (n *Node) SetMemberProtocols(m map[string]int) {
	c := maps.Clone(m)
	n.protocols.m.Store(&c)
}

// ClusterProtocol is the protocol the proposer lets commands use: the
// lowest that a member of the current configuration runs (see
// SetMemberProtocols), at most this binary's fsm.ProtocolVersion. A caller
// with a choice of commands proposes the newest one whose protocol is at
// most this.
func (n *Node) ClusterProtocol() int {
	var known map[string]int
	if p := n.protocols.m.Load(); p != nil {
		known = *p
	}
	v := fsm.ProtocolVersion
	for _, s := range n.raft.GetConfiguration().Configuration().Servers {
		if string(s.ID) != n.cfg.ID {
			v = min(v, max(known[string(s.ID)], 1))
		}
	}
	return v
}

// refuseNewer answers the proposals of batch that need a newer protocol
// than the cluster runs with *NeedsUpgradeError (a group as a whole, if
// one of its commands does), and returns the others.
func (n *Node) refuseNewer(batch []*proposal) []*proposal {
	if !slices.ContainsFunc(batch, func(p *proposal) bool { return p.protocol() > 1 }) {
		return batch // what every member runs: no need to look
	}
	have := n.ClusterProtocol()
	kept := batch[:0]
	for _, p := range batch {
		for _, c := range p.cmds {
			if need := c.Protocol(); need > have {
				p.done <- outcome{err: &NeedsUpgradeError{Op: c.Op, Need: need, Cluster: have}}
				p = nil
				break
			}
		}
		if p != nil {
			kept = append(kept, p)
		}
	}
	return kept
}

// protocol is the highest protocol a command of p needs.
func (p *proposal) protocol() int {
	v := 1
	for _, c := range p.cmds {
		v = max(v, c.Protocol())
	}
	return v
}
