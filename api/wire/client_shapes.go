package wire

// QueueInfo is one queue: an entry of GET /queues, and the reply of POST
// /queues/{name}/pause and /resume (Name and Paused only).
type QueueInfo struct {
	Name   string         `json:"name"`
	Paused bool           `json:"paused"`
	Counts map[string]int `json:"counts"`
	// OldestPendingSeconds is how long the longest-waiting runnable job of
	// the queue has been runnable; absent when none is.
	OldestPendingSeconds float64 `json:"oldest_pending_seconds,omitempty"`
}

// QueueList is the reply of GET /queues.
type QueueList struct {
	Queues []QueueInfo `json:"queues"`
}
