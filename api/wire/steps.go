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

// Step statuses. Waiting: the job is parked on the step (a wait or an
// invoke); Timeout: a wait whose deadline passed before its event.
const (
	StepOK      = "ok"
	StepFailed  = "failed"
	StepWaiting = "waiting"
	StepTimeout = "timeout"
)

// Step kinds: a run step has none.
const (
	StepSleep  = "sleep"
	StepWait   = "wait"
	StepInvoke = "invoke"
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
	// Kind is "sleep", "wait" or "invoke"; absent for a run step.
	Kind string `json:"kind,omitempty"`
	// WakeAt is a sleep's wake time, or a wait's deadline (none: no
	// timeout).
	WakeAt *time.Time `json:"wake_at,omitempty"`
	// Event and EventKey are what a wait for an event waits for; Signal
	// the signal name a wait for a signal waits for.
	Event    string `json:"event,omitempty"`
	EventKey string `json:"event_key,omitempty"`
	Signal   string `json:"signal,omitempty"`
	// ChildID is an invoke's child job.
	ChildID string `json:"child_id,omitempty"`
}

// StepRecorded is the 409 reply (code step_recorded) of a PUT of a step
// recorded before: Step is the one recorded, with its result, which the
// caller uses instead of its own.
type StepRecorded struct {
	Error string `json:"error"`
	Code  string `json:"code"`
	Step  *Step  `json:"step,omitempty"`
}

// StepList is a page of GET /jobs/{id}/steps: steps in key order, without
// their results unless asked for (?results=1: then a page also stops
// before its results pass MaxStepPageResultBytes, holding at least one
// step), the journal's totals, and NextCursor while more follow.
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
	// MaxStepPageResultBytes is the most result bytes a page of GET
	// /jobs/{id}/steps?results=1 holds (at least one step: a step's result
	// is at most 256 KiB).
	MaxStepPageResultBytes = 4 << 20
	// MaxClaimJournalSteps is the most steps a claimed job's journal lists.
	MaxClaimJournalSteps = 32
	// MaxClaimReplyJournalSteps is the most a claim reply lists in all.
	MaxClaimReplyJournalSteps = 256
	// MaxJobJournalSteps is the most steps GET /jobs/{id} lists.
	MaxJobJournalSteps = 100
)

// SleepRequest is the body of POST /jobs/{id}/steps/{key}/sleep: the
// running attempt (Lease, required) sleeps until Until or for
// DurationMillis (exactly one; at most 365 days ahead).
type SleepRequest struct {
	Lease          uint64     `json:"lease"`
	Until          *time.Time `json:"until,omitempty"`
	DurationMillis *int64     `json:"duration_ms,omitempty"`
}

// WaitRequest is the body of POST /jobs/{id}/steps/{key}/wait: the running
// attempt (Lease, required) waits for the event Event with key Key, or
// for the signal Signal sent to its job (exactly one of Event and Signal),
// for at most TimeoutMillis (0: no timeout; at most 365 days).
type WaitRequest struct {
	Lease         uint64 `json:"lease"`
	Event         string `json:"event,omitempty"`
	Key           string `json:"key,omitempty"`
	Signal        string `json:"signal,omitempty"`
	TimeoutMillis int64  `json:"timeout_ms,omitempty"`
}

// InvokeRequest is the body of POST /jobs/{id}/steps/{key}/invoke: the
// running attempt (Lease, required) submits Job (the body of POST /jobs,
// one job) as its child, once, and waits until it ends.
type InvokeRequest struct {
	Lease uint64        `json:"lease"`
	Job   SubmitRequest `json:"job"`
}

// ParkReply is the 201 reply of the parking routes (sleep, wait, invoke).
// Parked says the attempt has ended, uncharged: the worker sends no report
// and the job runs again when it wakes. Not parked, the step is complete
// (Step's status and result) and the handler goes on.
type ParkReply struct {
	Step   Step `json:"step"`
	Parked bool `json:"parked"`
}

// Parked is what a parked job waits for, shown by GET /jobs/{id}: Kind
// ("sleep", "wait" or "invoke") and Step (its key), with WakeAt (a sleep's
// wake time, a wait's deadline), Event and EventKey or Signal (a wait),
// ChildID (an invoke).
type Parked struct {
	Kind     string     `json:"kind"`
	Step     string     `json:"step"`
	WakeAt   *time.Time `json:"wake_at,omitempty"`
	Event    string     `json:"event,omitempty"`
	EventKey string     `json:"event_key,omitempty"`
	Signal   string     `json:"signal,omitempty"`
	ChildID  string     `json:"child_id,omitempty"`
}

// EventRequest is the body of POST /events: an event Name with Key and a
// Payload (any JSON, at most 64 KiB), which wakes the jobs waiting for
// (Name, Key) and is kept for the look-back window for waits to come.
type EventRequest struct {
	Name    string          `json:"name"`
	Key     string          `json:"key"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// SignalRequest is the body of POST /jobs/{id}/signals/{name}.
type SignalRequest struct {
	Payload json.RawMessage `json:"payload,omitempty"`
}

// EventReply is the 202 reply of POST /events and of a signal: Seq is the
// event's number in the cluster, Woke how many waiting jobs it woke.
type EventReply struct {
	Seq  uint64 `json:"seq"`
	Woke int    `json:"woke"`
}
