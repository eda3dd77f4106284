package wire

import (
	"encoding/json"
	"time"
)

// Limits of progress and results, as the cluster enforces them (package
// fsm holds the same figures).
const (
	// MaxProgressMessage is the longest progress message, in bytes.
	MaxProgressMessage = 200
	// MaxResultBytes is the largest result a job may return, in bytes of
	// JSON (413 beyond).
	MaxResultBytes = 64 << 10
)

// ProgressUpdate is a running attempt's progress, on a worker heartbeat
// (JobLease.Progress) or a job's own (HeartbeatRequest.Progress): Percent from 0 to 100 and a short Message (at most
// MaxProgressMessage bytes).
type ProgressUpdate struct {
	Percent int    `json:"percent"`
	Message string `json:"message,omitempty"`
}

// Progress is the latest progress the job's running (or last) attempt
// reported, and when the cluster recorded it.
type Progress struct {
	Percent int       `json:"percent"`
	Message string    `json:"message,omitempty"`
	At      time.Time `json:"at"`
}

// Parent results travel to a job's process in these variables: a JSON
// object of each parent's id to its result (parents without one left out),
// in ParentResultsEnv when it is at most MaxResultBytes, else in the file
// ParentResultsFileEnv names.
const (
	ParentResultsEnv     = "WORKRON_PARENT_RESULTS"
	ParentResultsFileEnv = "WORKRON_PARENT_RESULTS_FILE"
)

// IsNullResult reports whether r holds no result: absent, or JSON null.
func IsNullResult(r json.RawMessage) bool {
	return len(r) == 0 || string(r) == "null"
}
