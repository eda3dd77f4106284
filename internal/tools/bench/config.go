// Package bench measures a workron cluster through its HTTP API and checks
// what it did: every accepted job claimed once per attempt and finished
// once. It runs its scenarios against a cluster of its own (three nodes in
// this process, started through Config.StartNode) or the one
// Config.Servers names, and starts real server and worker processes for
// the process scenarios. It prints figures and fails a run on a
// correctness problem, never because of speed. It parses no flags.
package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Scenarios are the scenarios Run knows, in the order it runs them.
var Scenarios = []string{"submit_single", "submit_batch", "submit_batch_metadata", "claim_done", "claim_done_piggyback", "claim_done_batched", "claim_done_worker", "claim_done_limits", "latency", "real_workers", "failover", "large_store", "bulk_retry", "bulk_retry_kill", "step_record", "step_jobs", "step_resume", "event_wake"}

// Fixed shapes of the scenarios.
const (
	benchBatchSize         = 1000 // jobs per POST /jobs/batch: the server's default cap
	benchBatchClients      = 4    // concurrent batch submitters
	benchBatchedClaimMax   = 16   // max of one claim in claim_done_batched
	benchLatencyWorkers    = 8    // long-polling workers of the latency scenario, by default
	benchMaxLatencyWorkers = 1024 // most of them (--latency-workers)
	benchLatencyInflight   = 64   // most submissions in flight in the latency scenario
	benchSampleGets        = 25   // jobs read back one by one after each scenario
	benchMaxProblems       = 5    // correctness problems quoted per figure

	// benchRetryFor is how long a request is retried while the cluster
	// answers that nothing was done (an election, say).
	benchRetryFor = 30 * time.Second
)

// Config is one bench run. The flag each field comes from (in `workron
// bench`) is named in its error from Validate.
type Config struct {
	// Servers are the node URLs of an existing cluster to bench; none: a
	// cluster of three nodes in this process, started with StartNode.
	Servers []string
	// Clients is the number of concurrent single-job submitters, of
	// virtual workers of the claim scenarios and of slots of
	// claim_done_worker's Go worker (--clients).
	Clients int
	// Jobs is the jobs of submit_single and of each claim scenario;
	// submit_batch and submit_batch_metadata send twice as many (--jobs).
	Jobs int
	// Rate is the submissions per second of the latency scenario (--rate).
	Rate float64
	// Duration is how long the latency scenario submits (--duration).
	Duration time.Duration
	// LatencyWorkers is the one-slot long-polling workers of the latency
	// scenario (--latency-workers, 8 by default); Validate refuses 0, and
	// a Config not validated (tests) runs benchLatencyWorkers.
	LatencyWorkers int
	// SubmitFor, when positive, runs submit_single and the submit_batch ones for
	// this long instead of a job count (--submit-for).
	SubmitFor time.Duration
	// Scenarios are the scenarios to run, from Scenarios (--scenarios).
	Scenarios []string
	// Output is "table" (a table, then one JSON line per figure) or "json"
	// (JSON lines only) (-o).
	Output string
	// CPUProfile, when set, is the file a CPU profile of each scenario's
	// timed phase is written to (FILE.SCENARIO when several run).
	CPUProfile string

	// Bin is the workron binary the process scenarios run; "" the running
	// executable (--bin).
	Bin string
	// RealJobs is the jobs of real_workers (--real-jobs).
	RealJobs int
	// FailoverRounds is the leader kills of failover (--failover-rounds).
	FailoverRounds int
	// ProcRaftTimeout is the Raft heartbeat and election timeout of the
	// server processes of failover and large_store (--proc-raft-timeout).
	ProcRaftTimeout time.Duration
	// LargeJobs and LargePending are the finished and pending jobs
	// large_store holds (--large-jobs, --large-pending).
	LargeJobs, LargePending int
	// LargeNodes is how many server processes large_store starts
	// (--large-nodes): 3, or 1 when three copies of the store would not
	// fit on the disk.
	LargeNodes int
	// LargeMinFree is the disk space, in bytes, large_store leaves free
	// in its data directory's file system (--large-min-free-gb): it
	// refuses to start when its estimate would go below it, skips the
	// join when the new node's copy would, and stops every server process
	// (failing the run) if free space falls below it.
	LargeMinFree int64
	// BulkJobs is the failed jobs bulk_retry and bulk_retry_kill retry
	// (--bulk-jobs).
	BulkJobs int
	// ResumeSteps is the recorded steps of the journals step_resume
	// resumes, at most 9,999 (--resume-steps).
	ResumeSteps int

	// NodeArgs are more `workron server` flags for every node the bench
	// starts, in-process or not (WORKRON_BENCH_NODE_ARGS).
	NodeArgs []string
	// NodeLogs shows the in-process nodes' logs, and those of the Go
	// worker of claim_done_worker, on Stderr (WORKRON_BENCH_LOG); they
	// would bury the figures otherwise.
	NodeLogs bool
	// StartNode starts one node of the in-process cluster. Required unless
	// Servers are given.
	StartNode StartNodeFunc

	// Stdout gets the figures; Stderr the progress.
	Stdout, Stderr io.Writer
}

// Validate names the first field out of bounds, by its flag.
func (c *Config) Validate() error {
	switch {
	case c.Clients < 1:
		return fmt.Errorf("--clients must be at least 1, got %d", c.Clients)
	case c.Jobs < 1:
		return fmt.Errorf("--jobs must be at least 1, got %d", c.Jobs)
	case c.Rate <= 0 || math.IsInf(c.Rate, 0) || math.IsNaN(c.Rate):
		return fmt.Errorf("--rate must be a positive number, got %v", c.Rate)
	case c.Duration <= 0:
		return fmt.Errorf("--duration must be positive, got %s", c.Duration)
	case c.LatencyWorkers < 1 || c.LatencyWorkers > benchMaxLatencyWorkers:
		return fmt.Errorf("--latency-workers must be 1 to %d, got %d", benchMaxLatencyWorkers, c.LatencyWorkers)
	case c.SubmitFor < 0:
		return fmt.Errorf("--submit-for must not be negative, got %s", c.SubmitFor)
	case c.Output != "table" && c.Output != "json":
		return fmt.Errorf("-o: %q is not table or json", c.Output)
	}
	for _, s := range c.Scenarios {
		if !slices.Contains(Scenarios, s) {
			return fmt.Errorf("--scenarios: unknown scenario %q (known: %s)", s, strings.Join(Scenarios, ", "))
		}
	}
	switch {
	case c.RealJobs < 1:
		return fmt.Errorf("--real-jobs must be at least 1, got %d", c.RealJobs)
	case c.FailoverRounds < 1:
		return fmt.Errorf("--failover-rounds must be at least 1, got %d", c.FailoverRounds)
	case c.ProcRaftTimeout < 10*time.Millisecond:
		return fmt.Errorf("--proc-raft-timeout must be at least 10ms, got %s", c.ProcRaftTimeout)
	case c.LargeJobs < 0:
		return fmt.Errorf("--large-jobs must not be negative, got %d", c.LargeJobs)
	case c.LargePending < 0:
		return fmt.Errorf("--large-pending must not be negative, got %d", c.LargePending)
	case c.LargeNodes < 1 || c.LargeNodes > 7:
		return fmt.Errorf("--large-nodes must be 1 to 7, got %d", c.LargeNodes)
	case c.LargeMinFree < 0:
		return fmt.Errorf("--large-min-free-gb must not be negative, got %d", c.LargeMinFree>>30)
	case c.BulkJobs < 1:
		return fmt.Errorf("--bulk-jobs must be at least 1, got %d", c.BulkJobs)
	case c.ResumeSteps < 1 || c.ResumeSteps > benchResumeMaxSteps-1:
		return fmt.Errorf("--resume-steps must be from 1 to %d, got %d", benchResumeMaxSteps-1, c.ResumeSteps)
	case len(c.Scenarios) == 0:
		return errors.New("--scenarios: name at least one scenario")
	case len(c.Servers) == 0 && c.StartNode == nil:
		return errors.New("bench: Config.StartNode is required without Config.Servers")
	case c.Stdout == nil || c.Stderr == nil:
		return errors.New("bench: Config.Stdout and Config.Stderr are required")
	}
	return nil
}

// latencyWorkers is the latency scenario's workers: LatencyWorkers, or
// benchLatencyWorkers when not set.
func (c *Config) latencyWorkers() int {
	if c.LatencyWorkers > 0 {
		return c.LatencyWorkers
	}
	return benchLatencyWorkers
}
