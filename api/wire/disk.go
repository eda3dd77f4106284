package wire

// DiskHealth is GET /health's "disk": the answering node's data directory
// and the disk it is on.
type DiskHealth struct {
	// FreeBytes and SizeBytes are the disk's free space (to an unprivileged
	// user) and its size; both absent where the system does not tell.
	FreeBytes uint64 `json:"free_bytes,omitempty"`
	SizeBytes uint64 `json:"size_bytes,omitempty"`
	// LowBelowBytes is the free space under which the disk counts as low
	// (the node's --disk-low-free, in bytes for this disk).
	LowBelowBytes uint64 `json:"low_below_bytes,omitempty"`
	// Low says the free space is under LowBelowBytes. The node keeps
	// serving (reads need no disk; writes go on until a write fails), and
	// Status stays "ok": free space, remove files, or add a disk.
	Low bool `json:"low"`
	// StateBytes is the state file's size (state.db), StateInUseBytes what
	// its pages hold (the rest is free pages `workron store compact` gives
	// back), LogBytes the Raft log's (raft.db), SnapshotBytes the snapshot
	// directory's.
	StateBytes      int64 `json:"state_bytes"`
	StateInUseBytes int64 `json:"state_in_use_bytes"`
	LogBytes        int64 `json:"log_bytes"`
	SnapshotBytes   int64 `json:"snapshot_bytes"`
}
