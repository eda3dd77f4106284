// Package leader runs the leader-only loops that turn the passing of time
// into commands: the reaper (expired leases), the sweeper (finished jobs
// past their retention), the scheduler (cron ticks), admission (gangs
// and silent workers), the cascader (cascades in chunks), the bulker (bulk
// actions in chunks) and the promoter (joined non-voters that caught up
// become voters). Leadership starts them all when this node gains Raft
// leadership and stops them, waiting for each, when it loses it.
//
// The loops only read the state and propose commands; the FSM re-checks
// every command when it applies, so a late or duplicate proposal changes
// nothing. The promoter alone changes the Raft configuration, and only
// from non-voter to voter. This package never writes the store, serves HTTP or imports api:
// what it needs of the rest of the node arrives as the small interfaces
// below, through Config.
package leader

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// Proposer proposes one command through Raft and returns its result
// (raftnode.Node). An fsm rejection comes back as the error.
type Proposer interface {
	Propose(ctx context.Context, cmd fsm.Cmd) (fsm.Result, error)
}

// Recorder is told what the loops changed, for the node's metrics, job
// logs and traces (api.Server implements it).
type Recorder interface {
	// AttemptEnded records an attempt the reaper ended (expired is true).
	AttemptEnded(ctx context.Context, j *store.Job, expired bool)
	// JobFired records a job the scheduler created.
	JobFired(j *store.Job)
	// TraceFire is told of a tick of sc the scheduler is about to fire
	// (f makes a job): it may start the fire's trace and set
	// f.TraceParent to it, for the job to store. The scheduler calls what
	// it returns once with the fire's outcome.
	TraceFire(ctx context.Context, sc *store.Schedule, f *fsm.Fire) func(fsm.Result, error)
}

// Liveness says which workers this node counts as alive. It knows the
// long-polls seen on this node, which leave no trace in the log
// (*liveness.Tracker implements it; node hands the API's to the loops).
type Liveness interface {
	// Active reports whether w counts as alive at now. Admission calls it
	// under the FSM's lock (AdmissionState.WorkersWhere): it must be quick
	// and read nothing of the state.
	Active(w *store.Worker, now time.Time) bool
	// LastSeen is when this node last heard from w.
	LastSeen(w *store.Worker) time.Time
}

// ReaperState is what the reaper reads of the state.
type ReaperState interface {
	Expired(now int64, limit int) []fsm.Lease
}

// SweeperState is what the sweeper reads of the state.
type SweeperState interface {
	ExpiredJobs(now int64, limit int) []string
	// KeyBuckets is how many concurrency keys have a token bucket.
	KeyBuckets() int
}

// SchedulerState is what the scheduler reads of the state.
type SchedulerState interface {
	Schedules() ([]*store.Schedule, error)
}

// AdmissionState is what admission reads of the state.
type AdmissionState interface {
	OpenGangs() []store.Gang
	// WorkersWhere lists, in id order, the workers keep reports true of,
	// from the FSM's in-memory copy of their records: none is decoded.
	// keep runs under the FSM's lock and must only look at the record.
	WorkersWhere(keep func(*store.Worker) bool) []*store.Worker
	RunningByWorker() map[string]int
	Queues() []fsm.QueueStats
	WorkerUsage() map[string]store.Resources
}

// State is every read of the loops together (*fsm.FSM implements it).
type State interface {
	ReaperState
	SweeperState
	SchedulerState
	AdmissionState
	CascaderState
	BulkerState
}

// proposeTimeout bounds how long a loop waits for one command to apply.
const proposeTimeout = 10 * time.Second

// propose runs one command. Like a request's proposal it is not cancelled
// with ctx: once Raft has the command it will commit, and cutting the wait
// short (leadership lost) would only turn a known answer into an unknown
// one.
func propose(ctx context.Context, p Proposer, cmd fsm.Cmd) (fsm.Result, error) {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), proposeTimeout)
	defer cancel()
	return p.Propose(pctx, cmd)
}

// draw is a random number in [0,1) for backoff jitter, drawn by the leader
// and written into the command so every node computes the same delay.
func draw() float64 { return rand.Float64() }

// orDiscard is l, or a logger that discards everything.
func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// orNow is now, or time.Now.
func orNow(now func() time.Time) func() time.Time {
	if now == nil {
		return time.Now
	}
	return now
}
