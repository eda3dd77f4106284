package wire

// Reads (GET of jobs, workers, queues, pauses, schedules and gangs) are
// served by the node asked, from its own applied state: by default once it
// has applied the leader's commit index as the leader confirmed it for the
// read (a consistent read), with ?stale=1 at once. Every such reply states
// how fresh it is with these headers (docs/api.md, Reads on any node).
const (
	// HeaderAppliedIndex is the Raft index this node's state stood at when
	// it served the read: the reply reflects every entry up to it at least.
	HeaderAppliedIndex = "X-Workron-Applied-Index"
	// HeaderLeaderCommit is the leader's commit index: for a consistent
	// read, the one the leader confirmed for this read, which the applied
	// index is at least; for a stale read, the one this node last heard of
	// from the leader (absent when it knows none). A stale read's applied
	// index below it says how far the node was behind, as far as it knew.
	HeaderLeaderCommit = "X-Workron-Leader-Commit"
)

// ReadIndex is the reply of GET /cluster/read_index, which the node serving
// a consistent read asks the leader: its commit index, read after it
// confirmed with a quorum that it leads (and had applied every entry of
// earlier terms). Every write acknowledged before the request is at or
// below it.
type ReadIndex struct {
	NodeID      string `json:"node_id"`
	CommitIndex uint64 `json:"commit_index"`
}
