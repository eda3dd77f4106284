package wire

import "time"

// Health is the reply of GET /health (and of GET /health?ready=1).
type Health struct {
	// Status is "ok"; "no_leader" when the node knows no leader;
	// "removed" when it was removed from the cluster; with ?ready=1 also
	// "catching_up" while it has not applied every entry the leader has
	// committed.
	Status string `json:"status"`
	NodeID string `json:"node_id"`
	Role   string `json:"role"`
	Leader string `json:"leader"`
	// AppliedIndex, CommitIndex and Term are the answering node's. A
	// follower's commit index is what it has heard of so far, which a
	// follower that is still being sent entries does not know is behind.
	AppliedIndex uint64 `json:"applied_index"`
	CommitIndex  uint64 `json:"commit_index"`
	Term         uint64 `json:"term"`
	// LeaderCommitIndex (?ready=1 only) is the leader's commit index,
	// which the node asked the leader for (a leader reads its own).
	LeaderCommitIndex uint64 `json:"leader_commit_index,omitempty"`
	// Lag (?ready=1 only) is how many entries the node had still to apply
	// to reach LeaderCommitIndex when it answered.
	Lag *uint64 `json:"lag,omitempty"`
	// Error (?ready=1 only) says why readiness could not be checked.
	Error string `json:"error,omitempty"`
	// Protocol is the protocol version the answering node's binary
	// understands (fsm.ProtocolVersion); absent from releases before
	// protocol versions, which run protocol 1.
	Protocol int `json:"protocol,omitempty"`
	// Disk is the node's data directory and its disk's free space, with
	// Low set when that is under the node's threshold (Status stays "ok").
	Disk *DiskHealth `json:"disk,omitempty"`
}

// Removal is the reply of DELETE /cluster/nodes/{id}.
type Removal struct {
	// Removed is the node taken out of the cluster.
	Removed string `json:"removed"`
	// Leader is the leader that removed it, and leads now.
	Leader string `json:"leader"`
	// LeadershipMoved is true when the removed node led: it handed
	// leadership to Leader first, and Leader removed it.
	LeadershipMoved bool `json:"leadership_moved"`
	// Message says what happened.
	Message string `json:"message"`
}

// Digest is the reply of GET /debug/digest: the answering node's own state,
// for comparing replicas (the chaos harness, internal/tools/chaos).
type Digest struct {
	NodeID string `json:"node_id"`
	// AppliedIndex is the index of the state Digest hashes, read in the same
	// transaction; CommitIndex and LastLogIndex are Raft's at about that time.
	AppliedIndex uint64 `json:"applied_index"`
	CommitIndex  uint64 `json:"commit_index"`
	LastLogIndex uint64 `json:"last_log_index"`
	Digest       string `json:"digest"`
	// Check is "ok", or why the store's indexes disagree with its records.
	Check string `json:"check"`
}

// Restore is the reply of POST /restore.
type Restore struct {
	Jobs  int   `json:"jobs"`  // jobs in the restored state
	Bytes int64 `json:"bytes"` // size of the backup
	// BackupIndex is the Raft index the backup was taken at (in its
	// cluster); Index is the index the restored state stands at in this one.
	BackupIndex uint64 `json:"backup_index"`
	Index       uint64 `json:"index"`
}

// Cluster is the reply of GET /cluster.
type Cluster struct {
	Leader       string `json:"leader"`
	Nodes        []Node `json:"nodes"`
	AppliedIndex uint64 `json:"applied_index"`
	// Term is the answering node's Raft term.
	Term uint64 `json:"term,omitempty"`
	// LastContact is when the answering node last heard from the leader;
	// absent when it leads or never heard from one.
	LastContact *time.Time `json:"last_contact,omitempty"`
	// Protocol is the cluster's protocol as the answering node sees it:
	// the lowest that a member runs (a member never heard from counts as
	// 1). The leader proposes nothing that needs a higher one.
	Protocol int `json:"protocol,omitempty"`
}

// Node is one member of the cluster.
type Node struct {
	ID   string `json:"id"`
	HTTP string `json:"http"`
	Raft string `json:"raft"`
	Role string `json:"role"`
	// Health is how the node answered GET /health when the answering node
	// asked it just now; absent when its HTTP address is not known.
	Health *NodeHealth `json:"health,omitempty"`
}

// NodeHealth is one member's health as another member probed it.
type NodeHealth struct {
	// Reachable is whether the node answered within the probe's timeout.
	Reachable bool `json:"reachable"`
	// Status is the node's /health status: "ok", "no_leader" when it
	// knows no leader, or "removed". Empty when unreachable.
	Status string `json:"status,omitempty"`
	// Role, AppliedIndex and Term are as the node itself reports them.
	Role         string `json:"role,omitempty"`
	AppliedIndex uint64 `json:"applied_index,omitempty"`
	Term         uint64 `json:"term,omitempty"`
	// Protocol is the node's protocol version (see Health.Protocol), 1 for
	// a release that does not say. Absent when unreachable.
	Protocol int `json:"protocol,omitempty"`
	// DiskLow says the node reports its disk low (Health.Disk.Low).
	DiskLow bool `json:"disk_low,omitempty"`
	// Error says why the probe failed.
	Error string `json:"error,omitempty"`
}

// JoinRequest is the body of POST /cluster/join.
type JoinRequest struct {
	ID   string `json:"id"`
	Raft string `json:"raft"`
	HTTP string `json:"http"`
}
