// Package worker is Workron's worker runtime: it registers with the
// scheduler, claims jobs, runs them as shell commands or typed Go handlers,
// keeps their leases alive and reports how they ended. It talks to the
// cluster only through package client and the JSON shapes of package wire;
// it never imports the server side, and it never decides a job's fate (retry,
// backoff, dependents): the server does, from the reports.
//
// # Lifecycle
//
// Run registers the worker (retrying until it succeeds or its context ends),
// then long-polls POST /jobs/claim whenever it has free slots, asking for at
// most that many jobs; one claim is in flight at a time. Once a slot is free
// while other jobs run, it waits up to a millisecond for more to free, so
// that jobs ending together (a claim's short jobs) share the next claim,
// and its round trip. Each claimed job runs in its own goroutine. While any
// job runs, one worker-level heartbeat renews all of the worker's leases
// every third of the lease TTL the server announced; it carries the server's
// requests to cancel or preempt jobs. The same requests arrive at once on
// one long-poll the worker holds while jobs run (POST /workers/{id}/actions,
// actions.go); when it fails, they wait for the heartbeat. A heartbeat
// answered 404 (the server forgot the worker) makes the worker register
// again.
//
// Claims are numbered (ClaimSeq), and each heartbeat names the claims that
// had ended before it listed the running jobs, so a job whose claim reply
// was lost goes back to the queue at once, its attempt not counted. After
// a claim fails, heartbeats go on even while no job runs, until one has
// named that claim.
//
// # Shell jobs
//
// A job with a Command runs as "sh -c COMMAND" in a process group of its own.
// Its environment is clean: of the worker's variables it gets only those of
// BaseEnv and Config.PassEnv, never the worker's token; then the job's Env,
// WORKRON_JOB_ID, WORKRON_ATTEMPT and StepSocketEnv (stepsocket.go). With Config.RunAs (a root worker) it
// runs as that user; with Config.AllowCommands it runs without a shell, as
// one of the listed programs. Standard output and error are merged; the last
// OutputTail bytes are reported. To stop a command (timeout, cancel,
// shutdown) the whole group gets SIGTERM, then SIGKILL after KillGrace. When
// the command exits, whatever it left running in its group is killed.
//
// Run starts a job watcher, one small sh per worker, to which the worker
// lists each job's process group through a pipe only it can write to. When
// the pipe ends because the worker died (even by SIGKILL), the watcher kills
// every group still listed, so a job never outlives its worker to run twice
// once its lease expires. On Linux each command also has the parent-death
// signal SIGKILL. A process that leaves its group (setsid) escapes both.
//
// # Typed jobs
//
// A job with a Type runs the HandlerFunc registered with Handle. Its context
// ends on the job's timeout, on cancellation and on hard shutdown; a handler
// must return soon after, because Run waits for it. A panic is recovered and
// reported as a failure; wrap an error with NoRetry to make it final.
// Return RateLimited (the work met a rate limit downstream: the job's
// concurrency key pauses cluster-wide) or Snooze (run again later) to end
// the attempt without counting it; a shell job does the same by printing a
// WORKRON_RETRY_AFTER= or WORKRON_SNOOZE= line and exiting with
// ExitRateLimited (holdoff.go).
//
// # Progress and results
//
// A handler reports progress with Job.Progress and returns a result with
// Job.SetResult; Job.ParentResults (and ParentResult) hold the results of
// the jobs it depends on (all of them: when a claim reply carried only
// some, the worker reads the rest by pages before the job runs). A shell job reports progress by printing a line
// "::workron-progress PERCENT MESSAGE" (ProgressLinePrefix), returns a
// result by writing JSON into the file $WORKRON_RESULT_FILE names (a file
// that is not JSON fails the attempt), and finds its parents' results in
// $WORKRON_PARENT_RESULTS, a JSON object by parent id (or, when that is
// over 64 KiB, in the file $WORKRON_PARENT_RESULTS_FILE names). Progress
// goes out at once in a worker heartbeat of the jobs with new progress, at
// most one per Config.ProgressInterval (the latest update of every job),
// and the report carries the last one no heartbeat did; a cluster with a member of an older release gets none for a minute,
// and reports without result or progress.
//
// # Gangs
//
// A gang task runs like any shell job, with GANG_ID, GANG_SIZE, GANG_INDEX
// and GANG_PEERS in its env (from the server) and WORKRON_CHECKPOINT, the
// path of a file that starts with the checkpoint its previous attempt left.
// When a heartbeat says "preempt" (its gang drains), the worker stops the
// command like a cancel (SIGTERM, KillGrace, SIGKILL), uploads the file if
// the command left it non-empty (1 MiB at most), and acknowledges with the
// drain's epoch instead of reporting a failure.
//
// # Reports and shutdown
//
// Success is reported as "done", anything else as "failed", with the lease
// as a fencing token. A job's slot is free as soon as it ends; its report
// rides on the worker's next claim (POST /jobs/claim with "reports", which
// then does not long-poll), or, when no claim takes it within a few
// milliseconds, goes with the other waiting reports in one POST
// /jobs/reports. Until the server has answered a report, the worker's
// heartbeats keep listing its lease. Transient failures are retried with
// backoff for up to one lease TTL; an answer that the lease is no longer
// current (the job was given to another worker) or that the job is gone
// drops the report. When Run's context ends the worker stops claiming at
// once, lets running jobs finish for up to Grace, stops the rest and reports
// them failed with "worker shutting down", sends every report still
// waiting, and returns.
package worker
