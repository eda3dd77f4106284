package wire

// Error codes: the Code of an Error body, and of a BatchReportResult that
// was not recorded. These are all the codes the server answers;
// docs/api.md lists each with its HTTP status and whether the
// request is safe to resend. Clients compare codes with these constants,
// never with string literals.
const (
	// CodeInvalid (400): bad input, naming the field; nothing was done.
	CodeInvalid = "invalid"
	// CodeBadBackup (400): POST /restore got a body that is not a whole
	// backup; nothing was changed.
	CodeBadBackup = "bad_backup"
	// CodeUnauthorized (401): no bearer token, or one the node does not accept.
	CodeUnauthorized = "unauthorized"
	// CodeForbidden (403): the token's role may not do this, or the attempt
	// or worker id belongs to another token.
	CodeForbidden = "forbidden"
	// CodeCrossOrigin (403): a browser sent the write (or the claim) for a
	// page of another origin; nothing was done.
	CodeCrossOrigin = "cross_origin"
	// CodeHostNotAllowed (403): the Host header names the node by a name it
	// does not serve (see --allowed-hosts); nothing was done.
	CodeHostNotAllowed = "host_not_allowed"
	// CodeNotFound (404): no such job, worker, schedule, gang, member or route.
	CodeNotFound = "not_found"
	// CodeStaleLease (409): the job's attempt moved on; nothing was done.
	CodeStaleLease = "stale_lease"
	// CodeStaleEpoch (409): the gang's preemption epoch moved on; nothing
	// was done.
	CodeStaleEpoch = "stale_epoch"
	// CodeNotRunning (409): the job is not running; nothing was done.
	CodeNotRunning = "not_running"
	// CodeConflict (409): the job, gang, schedule or member is in a state
	// that refuses the request; nothing was done.
	CodeConflict = "conflict"
	// CodeLeaseRequired (409): a heartbeat or report without the lease of
	// a job claimed with POST /jobs/claim; nothing was done.
	CodeLeaseRequired = "lease_required"
	// CodeStepRecorded (409): the step was recorded before; the reply
	// (StepRecorded) carries the recorded one, which the caller uses.
	CodeStepRecorded = "step_recorded"
	// CodeJournalFull (409): recording the step would pass a bound of the
	// job's journal (max_steps_per_job, max_journal_bytes), which the
	// sentence names; nothing was done.
	CodeJournalFull = "journal_full"
	// CodeTooLarge (413): the body is over its limit.
	CodeTooLarge = "too_large"
	// CodeUnsupportedMediaType (415): a write whose Content-Type is not
	// application/json (or application/octet-stream where the route takes
	// raw bytes); nothing was done.
	CodeUnsupportedMediaType = "unsupported_media_type"
	// CodeOverloaded (429): a claim beyond the node's long-poll limit;
	// nothing was done, retry after Retry-After.
	CodeOverloaded = "overloaded"
	// CodeTooManyWorkers (429): a register or claim that would give the
	// token one more active worker id than the cluster allows
	// (--max-workers-per-token); nothing was done. Reuse an id, or wait
	// until one is offline or forgotten.
	CodeTooManyWorkers = "too_many_workers"
	// CodeTooManyWaiters (429): a wait on an event (name, key) that as
	// many jobs wait on as max_waiters_per_key allows; nothing was done.
	CodeTooManyWaiters = "too_many_waiters"
	// CodeEventsFull (429): an event or signal beyond the events the
	// cluster keeps (max_kept_events, max_kept_event_bytes); nothing was
	// done: retry once older events leave the look-back window.
	CodeEventsFull = "events_full"
	// CodeInternal (500): a bug or a disk error; the message says which.
	CodeInternal = "internal"
	// CodeNoLeader (503): no leader could be reached, or the node is
	// stopping; nothing was done, retry.
	CodeNoLeader = "no_leader"
	// CodeRemoved (503): this node was removed from the cluster; nothing
	// was done, retry on another node.
	CodeRemoved = "removed"
	// CodeBusy (503): the node holds as many request body bytes as it
	// allows (--max-body-bytes-in-flight); nothing was read or done, retry
	// after Retry-After (another node may have room).
	CodeBusy = "busy"
	// CodeUpgradeInProgress (503): the request needs a newer protocol than
	// a node of the cluster runs; nothing was done.
	CodeUpgradeInProgress = "upgrade_in_progress"
	// CodeCatchingUp (503): a consistent read, which this node did not
	// apply the leader's commit index for within --leader-wait; nothing was
	// done: retry (another node may be ahead), or read with ?stale=1.
	CodeCatchingUp = "catching_up"
	// CodeOutcomeUnknown (504): the request reached the leader but its
	// answer was lost; it may or may not have taken effect.
	CodeOutcomeUnknown = "outcome_unknown"
)

// Codes lists every error code above, in the order of docs/api.md.
var Codes = []string{
	CodeInvalid, CodeBadBackup, CodeUnauthorized, CodeForbidden, CodeCrossOrigin,
	CodeHostNotAllowed, CodeNotFound, CodeStaleLease, CodeStaleEpoch, CodeNotRunning,
	CodeConflict, CodeLeaseRequired, CodeStepRecorded, CodeJournalFull, CodeTooLarge, CodeUnsupportedMediaType, CodeOverloaded,
	CodeTooManyWorkers, CodeTooManyWaiters, CodeEventsFull, CodeInternal, CodeNoLeader, CodeRemoved,
	CodeBusy, CodeUpgradeInProgress, CodeCatchingUp, CodeOutcomeUnknown,
}

// RetryReport reports whether a BatchReportResult with this code was not
// recorded for a passing reason (no leader, an unknown outcome, a server
// error), so the same report may be sent again: a report is accepted once
// per lease, and a repeat of an accepted one answers as it did.
func RetryReport(code string) bool {
	return code == CodeNoLeader || code == CodeOutcomeUnknown || code == CodeInternal
}
