// Package chaos is Workron's chaos harness: it runs the real workron binary
// (three or five servers and a few `workron worker` processes) under a steady
// load and injected faults, records a client-side history, and checks the
// promise that a job accepted is a job run and an attempt's result is
// accepted once. It starts and stops processes, builds network namespaces
// and reads the cluster over HTTP; it never imports the server's packages
// (only api/wire), so it sees the cluster as a client does.
//
// # Processes and network
//
// As root, every node and real worker gets its own network namespace, with
// a veth pair into a bridge in the harness's namespace, on a private /24
// that exists only on this machine (network.go). A partition is a pair of
// blackhole routes; the harness's clients keep reaching every node, so a
// cut-off minority keeps receiving traffic. Without root it runs on
// loopback and leaves the partitions out, saying so.
//
// # Load
//
// Submitters send jobs with idempotency keys, resending after 503s and
// unknown outcomes. Virtual workers (vworker.go) claim, heartbeat and
// report over HTTP like `workron worker`, pretending to run each job as its
// metadata says (succeed, fail, fail once, time out, outlive a lease), and
// sometimes walk away mid-job. A third of the jobs go to a queue with a
// concurrency limit and a per-key limit (limits.go). Readers GET random
// jobs. A schedule fires every second into its own queue, which the real
// workers serve first (schedule.go). Durable jobs (durable.go) go to a
// queue of their own, served by chaosworker processes (cmd/chaosworker)
// that the worker faults hit like the real workers: journaled steps, a
// sleep, a wait for an event the harness sends (before or after the wait
// begins, or never) and a child job, each writing to a ledger what ran and
// what came back. Every request is an Op with call and
// return times and an Outcome: ok, rejected (409), not found, no effect
// (503, 429: the API promises nothing was done) or unknown (timeouts, lost
// connections, 502, 504).
//
// # Faults
//
// faults.go draws faults from the seed: SIGKILL and restart (leader,
// follower, all), SIGSTOP/SIGCONT, partitions (isolated leader, minority,
// non-transitive), restarts with the server's test hooks --raft-fsync-delay
// (a slow disk) and --clock-offset (a clock jump), real worker SIGKILL and
// worker network loss. The seed fixes which faults, where and for how long;
// the interleaving with the load still depends on the machine.
//
// # Checks
//
// After healing, draining and quiescence (check.go): every accepted job
// exists and finished; no attempt done twice; no lease claimed twice or
// used by two attempts; equal digests at equal applied indexes, with no
// unapplied or missing log entries; and each job's history is linearizable
// against the model in model.go, checked with porcupine; every tick of the
// schedule ran once or was counted missed, never twice; the limited queue's
// leases (limits.go) never exceeded its limits at any moment; and, held
// against the ledger (durcheck.go), no durable job lost, no recorded step
// run again by a later attempt or after its record came back, every
// returned record the one the journal keeps, every durable job that
// ended done has each step recorded once and ended with those records, no
// sleep woke twice, never or early, no event sent was missed, and each
// child was submitted once.
package chaos
