package wire

import (
	"encoding/json"
	"time"
)

// Durable steps (issue #31): a job's journal of recorded steps.

// StepRequest is the body of PUT /jobs/{id}/steps/{key}: the running
// attempt records step key. Lease (required) is the attempt's lease, as a
// report's. Status is "ok" (the default) or "failed" (a step that failed
// for good: later attempts get the failure back). Result is the step's
// JSON (at most 256 KiB; absent: none). Attempts (default 1) is how many
// times the step was tried, DurationMillis how long it took.
type StepRequest struct {
	Lease          uint64          `json:"lease"`
	Status         string          `json:"status,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	Attempts       int             `json:"attempts,omitempty"`
	DurationMillis int64           `json:"duration_ms,omitempty"`
}

// Step statuses.
const (
	StepOK     = "ok"
	StepFailed = "failed"
)

// Step is one recorded step. Result is set only where the reply says so
// (GET /jobs/{id}/steps/{key}, a PUT's reply and its 409); Size is its
// length in bytes. JobAttempt is the job's attempt that recorded it.
type Step struct {
	Key            string          `json:"key"`
	Status         string          `json:"status"`
	Attempts       int             `json:"attempts"`
	JobAttempt     int             `json:"job_attempt"`
	RecordedAt     time.Time       `json:"recorded_at"`
	DurationMillis int64           `json:"duration_ms"`
	Size           int             `json:"size"`
	Result         json.RawMessage `json:"result,omitempty"`
}

// StepRecorded is the 409 reply (code step_recorded) of a PUT of a step
// recorded before: Step is the one recorded, with its result, which the
// caller uses instead of its own.
type StepRecorded struct {
	Error string `json:"error"`
	Code  string `json:"code"`
	Step  *Step  `json:"step,omitempty"`
}

// StepList is a page of GET /jobs/{id}/steps: steps in key order without
// their results, the journal's totals, and NextCursor while more follow.
type StepList struct {
	Steps      []Step `json:"steps"`
	Count      int    `json:"count"`
	Bytes      int64  `json:"bytes"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// Journal is what a claimed job (and GET /jobs/{id}) says of the job's
// journal: how many steps it holds and their bytes, and the first of them
// in key order, without results (at most MaxClaimJournalSteps per job in a
// claim, MaxJobJournalSteps in GET /jobs/{id}). Truncated says Steps is
// not all of them: GET /jobs/{id}/steps lists the rest. A job with no
// recorded step has no journal.
type Journal struct {
	Count     int    `json:"count"`
	Bytes     int64  `json:"bytes"`
	Steps     []Step `json:"steps,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
}

// Bounds of the journals in replies.
const (
	// MaxClaimJournalSteps is the most steps a claimed job's journal lists.
	MaxClaimJournalSteps = 32
	// MaxClaimReplyJournalSteps is the most a claim reply lists in all.
	MaxClaimReplyJournalSteps = 256
	// MaxJobJournalSteps is the most steps GET /jobs/{id} lists.
	MaxJobJournalSteps = 100
)
