// Package fsm applies committed commands to the job store; it reads no
// clock, randomness or network.
//
// # Where each rule lives
//
// Apply's switch (apply.go) hands each command to one method (a.claim,
// a.report, ...) in the file of its rule, and each rule is written once.
// The records the rules write, and their buckets, are store's (job.go,
// worker.go, gang.go, schedule.go, deps.go, queue.go there).
//
//	rule                                   file
//	submit (ids, templates, idempotency)   submit.go
//	claim, the claim order, queue pauses   claim.go; index.go (best: the one picker)
//	a claim's byte budget                  claim_bytes.go
//	an attempt's start and fencing token   claim.go (startAttempt)
//	heartbeat, lease renewal, lost replies lease.go
//	report, expire, retry with backoff     finish.go
//	unacknowledged attempts (not counted)  ack.go
//	progress and results (limits, codes)   progress.go
//	cancel                                 cancel.go
//	dependencies (unblock, cascade, cycle) deps.go
//	cascades in chunks (protocol 4)        cascade.go
//	bulk actions in chunks (protocol 4)    bulk.go; priority.go (a job's new priority)
//	schedules and their ticks              schedule.go; schedule_cap.go (how many, protocol 4)
//	gangs                                  gang.go, gang_reserve.go, gang_drain.go, gang_checkpoint.go
//	resources and what a worker has free   resources.go
//	flow control (limits, buckets, keys)   flow.go (types, the index), flow_ready.go (heads in the ready
//	                                       trees, closing and reopening), flow_tokens.go (token buckets),
//	                                       flow_limits.go (set_queue_limits, checks, rebuild), flow_read.go
//	                                       (GET /queues' figures, a job's waiting text)
//	pruning idle key buckets               prune.go
//	time limits held a job (Result.Held)   flow_held.go (heldClock; in memory only), pause.go (pauses run it)
//	fairness (rotation over a queue's keys) fair.go
//	rate-limited and snoozed attempts      pause.go; pause_bounds.go (bounds, protocol 4), pause_lift.go
//	in-memory indexes (ready, leases)      index.go; intern.go (the pending items hold no pointers);
//	                                       itemtree.go (their btrees, kept reversed for memory)
//	retention (expiry and delete)          retention.go (failed and cancelled kept by delete_kept's floor)
//	workers (register, offline, forget)    worker.go; workercap.go (a token's cap of active ids)
//	key and size limits of a command       limits.go
//	the FSM: Apply, snapshots, restore     fsm.go (and the bounds on what it keeps)
//	rejections (sentinels, typed errors)   errors.go
//	command types, encoding, decoding      command.go, encoding.go, decode.go; submit_codec.go (a submit's jobs;
//	                                       submit_gen.go, generated from it)
//	protocol versions of ops               protocol.go; protocol_version*.go (this binary's, by build tag)
//	reads for the API and the leader loops read.go, read_jobs.go, oldest.go, size.go (the state file's size)
//	waking workers whose attempts must stop stops.go (WatchStops, StopActions; in memory only)
//
// # Commands
//
// Every state change is a Cmd packed into an Entry, and one Entry is one Raft
// log entry. The leader stamps everything that must be decided once into the
// entry: the time (Entry.Now), random draws for backoff jitter (Report.Draw,
// Expire.Draw). The FSM uses max(Entry.Now, last entry's Now) as "now", so a
// leader whose clock is behind cannot move time backwards.
//
// Encode writes an Entry in binary, its version byte first (encoding.go);
// Decode (decode.go) reads that and the JSON entries of earlier releases.
// Every node decodes every entry, so the hot commands have layouts of their
// own, and the others are JSON inside the binary entry.
//
// A job's fields are coded once per layout. A submit's jobs (NewJob) are
// listed once, as a walk over their fields (submitCodec in
// submit_codec.go) whose calls of binenc.Codec write when encoding and
// read when decoding; walkgen (internal/tools/walkgen) generates from it
// the writer and the reader Encode and Decode run (submit_gen.go: go
// generate ./fsm), with nothing more per field than a hand-written codec.
// The stored record (store.Job) is store's, coded the same way by its
// jobCodec; applier.newJob (submit.go) copies a NewJob into a store.Job.
// Each fails a test when a field is added to its struct and not to it
// (TestEncoding's EveryFieldRoundTrips, store's
// TestEveryJobFieldIsInTheRecord, TestSubmitKeepsEveryField), the
// generated code is checked against its walk (TestSubmitCodecIsTheWalk,
// walkgen's TestGeneratedCodecsAreCurrent), and the bytes of each existing
// layout are pinned to what releases wrote (TestSubmitBytesArePinned,
// store's TestJobRecordBytesArePinned, in testdata): a new field takes a
// new op code or record version, never a change to an old one.
//
// # Protocol versions
//
// ProtocolVersion is what this binary can apply; each op that a release
// after the first protocol added needs a newer one (protocol.go), and
// Entry.Protocol says what an entry needs. The package only states this:
// raftnode refuses to propose a command newer than the lowest protocol of
// the cluster's members, so an older node is never sent one.
//
// A job's TraceParent (its W3C trace context, ProtocolTrace: a submit that
// carries one is written with op code opSubmitTraced, a gang or a fire
// under the op names of tracedJSONOps) is data only: the FSM stores it
// with the job (every task of a gang, the job a fire makes) and no rule
// reads it.
//
// # Determinism
//
// Apply uses only the entry and the current state. Iteration is over sorted
// keys or b-trees, never map order. Two stores fed the same log hold the same
// bytes (see store.Digest). The last applied index is stored in the same
// transaction as the data, so a restarted node skips entries it already has.
//
// # Indexes
//
// Pending jobs live in in-memory b-trees per (queue, job type), ordered by
// priority, run time and submission order; delayed jobs in one tree by run
// time; leases in one tree by deadline. They are rebuilt from the store on
// start and restore and only ever changed by Apply.
//
// # Schedules
//
// A schedule is replicated state: a cron expression and time zone (opaque
// here: only the leader parses them, so no node's time zone database can
// make replicas diverge), a job template and its progress. The leader
// decides that a tick is due and proposes Fire; the FSM creates the tick's
// job only if the tick is later than the schedule's LastTick, so a duplicate
// or late proposal is a no-op, and the job's id is derived from the schedule
// and the tick, so a tick can never create two jobs. Overlap rules are
// applied here too, against the state of the moment.
//
// # Flow control
//
// A queue's limits (store.QueueLimits) bound its running attempts, in all
// and per concurrency key, and its claims per period with token buckets, in
// all and per key. A claim decides them at the entry's time: the buckets
// are stored (refilled in integer units, so every replica computes the
// same level), the running counts are derived from the leases. The pending
// jobs of one key and type form a group whose best job alone sits in the
// ready tree while the key is open; a key or queue at a limit is passed
// over whole, so a claim never scans the jobs a limit holds back.
//
// # Resources and gangs
//
// Jobs may ask for resources and tags; workers offer them. What a worker has
// free (its offer minus what its running and reserved jobs ask for) is kept
// in memory, rebuilt from the store, and a claim passes over the jobs that do
// not fit it. A gang (gang.go) is N tasks that run together on N distinct
// workers: the leader picks the workers and proposes ReserveGang, which
// re-checks every worker and reserves all tasks or none. A failed task
// drains its gang; siblings acknowledge their preemption (or are
// force-drained) by the drain's epoch, and get their attempt back. Every
// decision that needs a clock (timeouts, a silent worker) is the leader's,
// proposed with the gang's epoch or the worker's last heartbeat, so the FSM
// only re-checks it.
//
// # Rejections
//
// A command that breaks a rule (a stale lease, an unknown job, a cycle)
// changes nothing and returns its error in Result.Err. Only bytes that are
// not an entry, or an entry from a newer encoding, stop the node: applying
// part of a log would silently diverge from the peers.
package fsm
