package raftnode

import "github.com/hashicorp/raft"

// serialHeartbeats is the Raft transport with its heartbeat fast path
// turned off, so that a heartbeat reaches Raft's main loop through
// Consumer like every other RPC.
//
// hashicorp/raft handles fast-path heartbeats on the transport's own
// goroutine (hashicorp/raft#695, open as of v1.7.3): a heartbeat from the
// leader of a newer term sets the node's term and makes it a follower
// while its leader loop may be writing a client's entry. A leader that
// was paused and wakes up while its successor already heartbeats then
// writes its own entry at an index the successor used, labelled with the
// successor's term; the index and term match on every node, so Raft never
// repairs the difference, and that node's state diverges. The chaos
// harness found it (a SIGSTOPped leader; the replicas' digests differed at
// the same applied index, the logs at three indexes of one term). The cost
// of going without the fast path is that a heartbeat can wait behind the
// follower's own log write, which the election timeout (1 s by default)
// absorbs.
type serialHeartbeats struct {
	*raft.NetworkTransport // its optional interfaces (pre-vote, close) stay visible
}

// SetHeartbeatHandler ignores the handler, as raft.Transport allows.
func (serialHeartbeats) SetHeartbeatHandler(func(raft.RPC)) {}
