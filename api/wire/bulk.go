package wire

import "time"

// BulkRequest is the body of POST /bulk: an action for every job a
// selector matches. The selector is the conditions of GET /jobs: Filter
// (the filter language of ?filter=), Status (one status, "scheduled" and
// "pending" included), Queue and Metadata (every key=value must match, at
// most 16); all must hold, and at least one is required. Action
// is cancel, retry, delete (finished jobs only) or priority (jobs not yet
// finished get Priority). DryRun counts the jobs that match now and
// starts nothing.
type BulkRequest struct {
	Action   string            `json:"action"`
	Status   string            `json:"status,omitempty"`
	Queue    string            `json:"queue,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	Filter   string            `json:"filter,omitempty"`
	Priority *int              `json:"priority,omitempty"`
	DryRun   bool              `json:"dry_run,omitempty"`
}

// The bulk actions (BulkRequest.Action).
const (
	BulkCancel   = "cancel"
	BulkRetry    = "retry"
	BulkDelete   = "delete"
	BulkPriority = "priority"
)

// The states of a bulk action: running until its walk ends (done) or it
// is stopped (POST /bulk/{id}/stop).
const (
	BulkRunning = "running"
	BulkDone    = "done"
	BulkStopped = "stopped"
)

// Bulk is a bulk action: the reply of POST /bulk (201), GET /bulk/{id}
// and POST /bulk/{id}/stop. Matched counts the jobs its walk chose so
// far; each is then done (the action applied), skipped (it no longer
// qualified when its chunk applied: gone, another status, or a state the
// action does not apply to) or failed (LastError says the last refusal).
// Selector is the canonical text of the request's filters.
type Bulk struct {
	ID        string    `json:"id"`
	Action    string    `json:"action"`
	Priority  *int      `json:"priority,omitempty"`
	Selector  string    `json:"selector"`
	State     string    `json:"state"`
	Matched   int64     `json:"matched"`
	Done      int64     `json:"done"`
	Failed    int64     `json:"failed"`
	Skipped   int64     `json:"skipped"`
	LastError string    `json:"last_error,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// BulkCount is the reply of POST /bulk with dry_run: how many jobs match
// now. Exact is false when counting stopped at its budget (Matched jobs
// at least).
type BulkCount struct {
	Matched int64 `json:"matched"`
	Exact   bool  `json:"exact"`
}

// BulkList is the reply of GET /bulk: the bulk actions kept (at most
// 100), newest first.
type BulkList struct {
	Bulks []Bulk `json:"bulks"`
}
