package raftnode

import (
	"fmt"
	"sync/atomic"

	"github.com/workron/workron/fsm"
)

// NeedsUpgradeError is the error of a command that needs a newer protocol
// than the cluster runs (see Node.SetClusterProtocol): it was not proposed,
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

// clusterProtocol is the lowest protocol the cluster's members run, as the
// API last saw it; 0 until it is set, which counts as 1.
type clusterProtocol struct{ v atomic.Int64 }

// SetClusterProtocol records the lowest protocol version (fsm.ProtocolVersion
// of its binary) that a member of the cluster runs; a member that reports
// none runs protocol 1. From then on the proposer refuses, with
// *NeedsUpgradeError, every command whose fsm.Cmd.Protocol is higher, so no
// member is sent an entry it cannot apply. Until it is first called the
// cluster counts as protocol 1.
func (n *Node) SetClusterProtocol(v int) { n.protocol.v.Store(int64(v)) }

// ClusterProtocol is the protocol the proposer lets commands use: the one
// SetClusterProtocol recorded, at least 1, at most this binary's
// fsm.ProtocolVersion. A caller with a choice of commands proposes the
// newest one whose protocol is at most this.
func (n *Node) ClusterProtocol() int {
	return min(max(int(n.protocol.v.Load()), 1), fsm.ProtocolVersion)
}

// refuseNewer answers the proposals of batch that need a newer protocol
// than the cluster runs with *NeedsUpgradeError, and returns the others.
func (n *Node) refuseNewer(batch []*proposal) []*proposal {
	have := n.ClusterProtocol()
	kept := batch[:0]
	for _, p := range batch {
		if need := p.cmd.Protocol(); need > have {
			p.done <- outcome{err: &NeedsUpgradeError{Op: p.cmd.Op, Need: need, Cluster: have}}
			continue
		}
		kept = append(kept, p)
	}
	return kept
}
