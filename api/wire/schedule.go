package wire

import "time"

// Schedule overlap policies: what a tick does while the previous run of its
// schedule is unfinished.
const (
	OverlapAllow = "allow" // run anyway (the default)
	OverlapSkip  = "skip"  // do not run this tick
	OverlapQueue = "queue" // create the run blocked until the previous one ends
)

// Schedule catch-up policies: which ticks run that were missed while there
// was no leader.
const (
	CatchupNone = "none" // none
	CatchupOne  = "one"  // the latest one (the default)
	CatchupAll  = "all"  // all of them, up to the server's cap
)

// ScheduleRequest is the body of POST /schedules and PUT /schedules/{name}.
// Cron is a 5-field cron expression, optionally with a leading seconds
// field, or a shortcut (@hourly, @daily, @weekly, @monthly, @yearly,
// @every 30s). Timezone is an IANA zone name (default UTC). Job holds any
// fields of a job submission except run_at, delay, idempotency_key,
// unique_for and depends_on.
type ScheduleRequest struct {
	Name     string        `json:"name"`
	Cron     string        `json:"cron"`
	Timezone string        `json:"timezone,omitempty"`
	Job      SubmitRequest `json:"job"`
	Overlap  string        `json:"overlap,omitempty"`
	Catchup  string        `json:"catchup,omitempty"`
	Paused   bool          `json:"paused,omitempty"`
}

// Schedule is a schedule as the API shows it. LastRun is the tick (the
// scheduled_for) of its latest job, LastJobID and LastJobStatus that job's
// id and status. Runs counts jobs created, Skipped ticks not run because the
// previous run was unfinished (overlap skip), Missed ticks not run because
// they were missed beyond the catch-up.
type Schedule struct {
	Name          string        `json:"name"`
	Cron          string        `json:"cron"`
	Timezone      string        `json:"timezone"`
	Job           SubmitRequest `json:"job"`
	Overlap       string        `json:"overlap"`
	Catchup       string        `json:"catchup"`
	Paused        bool          `json:"paused"`
	CreatedAt     time.Time     `json:"created_at"`
	UpdatedAt     time.Time     `json:"updated_at"`
	NextRun       *time.Time    `json:"next_run,omitempty"`
	LastTick      *time.Time    `json:"last_tick,omitempty"`
	LastRun       *time.Time    `json:"last_run,omitempty"`
	LastJobID     string        `json:"last_job_id,omitempty"`
	LastJobStatus string        `json:"last_job_status,omitempty"`
	LastError     string        `json:"last_error,omitempty"`
	// Warnings, in the reply of POST and PUT only, name what the server
	// ignored in the request, e.g. `unknown field "job.priorty"`.
	Warnings []string `json:"warnings,omitempty"`
	Runs     uint64   `json:"runs"`
	Skipped  uint64   `json:"skipped"`
	Missed   uint64   `json:"missed"`
}

// ScheduleList is the reply of GET /schedules, a page at a time in name
// order (at most the request's limit, 100 without one, up to 1000);
// NextCursor, while more follow, is the cursor of the next page.
type ScheduleList struct {
	Schedules  []Schedule `json:"schedules"`
	NextCursor string     `json:"next_cursor,omitempty"`
}
