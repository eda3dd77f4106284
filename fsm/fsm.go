package fsm

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/workron/workron/store"
)

// DefaultQueue is the queue of a job submitted without one.
const DefaultQueue = "default"

// Limits the FSM enforces on what it keeps, so replicated state stays bounded.
const (
	// MaxOutput is the most output kept per job: its last bytes.
	MaxOutput = 4096
	// MaxHistory is the most attempts kept in a job's history.
	MaxHistory = 20
	// MaxClaim is the most jobs one claim may lease.
	MaxClaim = 256
	// TimeoutMargin is how long past its timeout a running attempt may live
	// before the cluster expires it, whatever its worker says.
	TimeoutMargin = 5 * time.Second
)

// Result is what applying one command returns. Err is a rejection (one of
// this package's errors): the command changed nothing.
type Result struct {
	Err      error
	Jobs     []*store.Job
	Existing bool // submit: an idempotency key matched; Jobs[0] is the old job
	Renewed  int  // worker heartbeat: leases renewed
	Deleted  int  // delete: jobs removed; prune_buckets: buckets removed
	Kept     int  // delete: failed or cancelled jobs whose expiry KeepFailed moved
	Deadline int64
	Actions  []Action
	Worker   *store.Worker
	Schedule *store.Schedule // schedule commands: the schedule after the command
	Gang     *store.Gang     // gang commands: the gang after the command
	// Held, for a claim, is how long flow-control limits held back each
	// job it took from a queue with limits, in nanoseconds, by job id
	// (see heldClock in flow.go): the leader's metrics read it.
	Held map[string]int64
	// Next, for prune_buckets, is where the next one starts (its After),
	// nil when the scan reached the last bucket.
	Next []byte
	// Bulk, for the bulk action commands, is the action after the command.
	Bulk *store.Bulk
	// Step, for record_step, is the step recorded, or the one recorded
	// before (with ErrStepRecorded).
	Step *store.Step
	// Parked, for sleep_step, wait_step and invoke_step, says the attempt
	// ended and the job waits (durable.go); else Step is the outcome.
	Parked bool
	// Seq and Woke, for send_event, are the event's number and how many
	// waiting jobs it woke.
	Seq  uint64
	Woke int
	// Lost, for a worker heartbeat that lists its leases, names those it
	// listed and did not renew (at most as many as it lists).
	Lost []LostLease
}

// LostLease names a lease a worker heartbeat listed and did not renew, and
// why: Reason is ErrNotFound, ErrNotRunning or ErrStaleLease (lostReason).
type LostLease struct {
	JobID  string
	Lease  uint64
	Reason error
}

// Action tells a worker to act on a job it runs.
type Action struct {
	JobID  string
	Lease  uint64
	Action string // "cancel" or "preempt"
	Epoch  uint64 // preempt: the drain's epoch, to acknowledge
}

// FSM applies committed entries to the store and keeps the in-memory indexes
// over it. It implements raft.BatchingFSM; its read methods are safe for
// concurrent use with Apply.
type FSM struct {
	logger *slog.Logger

	stMu sync.RWMutex // guards st against Restore's swap
	st   *store.Store

	// published are applied and lastNow as of the last committed batch,
	// read without mu so that /health and metrics never wait for an apply.
	published struct {
		applied atomic.Uint64
		lastNow atomic.Int64
	}

	// workersRead counts the worker records reads have decoded
	// (WorkerRecordsRead).
	workersRead atomic.Uint64

	mu      sync.Mutex // guards everything below
	idx     *index
	applied uint64
	lastNow int64
	changed chan struct{}
	stopped []string // workers whose watches the batch being applied wakes (stops.go)

	stops stopWatches // its own lock, taken under mu or alone

	onFatal func(error) // see OnFatal; set before the first apply
}

var _ raft.BatchingFSM = (*FSM)(nil)

// OnFatal sets what ApplyBatch calls when the state file cannot be
// written (a full or failing disk), with a *StateWriteError: the FSM
// cannot skip an entry nor go on with indexes that disagree with the
// file, so fn must stop the process and not return. Without it (or if it
// returns) ApplyBatch panics. Call it before the first apply.
func (f *FSM) OnFatal(fn func(error)) { f.onFatal = fn }

// New wraps an open store and builds the indexes from it.
func New(st *store.Store, logger *slog.Logger) (*FSM, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	f := &FSM{logger: logger.With("component", "fsm"), st: st, changed: make(chan struct{})}
	if err := f.load(); err != nil {
		return nil, err
	}
	return f, nil
}

// load (re)builds the indexes from the store. Callers hold mu or own f.
func (f *FSM) load() error {
	return f.st.View(func(tx *store.Tx) error {
		f.applied = tx.Applied()
		f.lastNow = tx.LastNow()
		idx, err := rebuildIndex(tx, f.lastNow, f.logger)
		if err != nil {
			return fmt.Errorf("rebuild index: %w", err)
		}
		f.idx = idx
		f.publish()
		return nil
	})
}

// Apply applies one log entry; see ApplyBatch.
func (f *FSM) Apply(l *raft.Log) any {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies committed log entries in one store transaction. Each
// element of the reply is the []Result of one entry (nil for entries that are
// not commands, or that were applied before a restart). Entries that cannot
// be decoded stop the node: applying part of the log would diverge.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(logs) == 0 || logs[len(logs)-1].Index <= f.applied {
		// Raft's replay at start of entries the state file holds already
		// (the log since the newest snapshot): nothing to write, not even
		// a transaction.
		return out
	}
	readyChanged := false
	from := f.applied
	err := f.update(func(tx *store.Tx) error {
		for i, l := range logs {
			if l.Index <= f.applied {
				continue
			}
			if l.Type == raft.LogCommand {
				e, err := Decode(l.Data)
				if err != nil {
					var ve *VersionError
					if errors.As(err, &ve) {
						panic(fmt.Sprintf("workron: stopping at log index %d: %v", l.Index, err))
					}
					panic(fmt.Sprintf("workron: stopping at log index %d: corrupt entry, or one with a command a newer Workron wrote "+
						"(if the cluster runs mixed versions, upgrade this node's binary): %v", l.Index, err))
				}
				a := &applier{f: f, tx: tx, index: l.Index, now: max(e.Now, f.lastNow)}
				f.idx.flow.now = a.now
				res := make([]Result, len(e.Cmds))
				for k := range e.Cmds {
					res[k] = a.apply(&e.Cmds[k])
				}
				readyChanged = f.idx.flow.settle() || readyChanged || a.readyChanged
				f.lastNow = a.now
				out[i] = res
			}
			f.applied = l.Index
		}
		if err := tx.SetLastNow(f.lastNow); err != nil {
			return err
		}
		return tx.SetApplied(f.applied)
	})
	if err != nil {
		// The indexes may now disagree with the store, and no entry may be
		// skipped: the only safe move is to stop, and let a restart apply
		// the log again from the state file's index.
		err = &StateWriteError{Applied: from, Index: logs[len(logs)-1].Index, Path: f.st.Path(), Err: err}
		if f.onFatal != nil {
			f.onFatal(err) // does not return
		}
		panic(err.Error())
	}
	f.publish()
	f.wakeStopped()
	if readyChanged {
		close(f.changed)
		f.changed = make(chan struct{})
	}
	return out
}

// update is f.st.Update, with a write that failed inside the transaction
// (applier.fatal) returned as its error.
func (f *FSM) update(fn func(tx *store.Tx) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			wf, ok := r.(writeFailure)
			if !ok {
				panic(r)
			}
			err = wf.err
		}
	}()
	return f.st.Update(fn)
}

// publish makes the committed applied index and time readable without mu.
// Callers hold mu or own f.
func (f *FSM) publish() {
	f.published.applied.Store(f.applied)
	f.published.lastNow.Store(f.lastNow)
}

// Snapshot captures the state as of the last applied entry. Persist may run
// while later entries apply.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.stMu.RLock()
	defer f.stMu.RUnlock()
	sn, err := f.st.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return &snapshot{sn: sn}, nil
}

// Restore replaces the state with a snapshot's and rebuilds the indexes.
// Every page of the snapshot is checked first (store.Restore); on error
// the old state stays.
func (f *FSM) Restore(rc io.ReadCloser) error { return f.restore(rc, f.st.Restore) }

// RestoreChecked is Restore for a stream that fails unless a checksum of
// all its bytes matched (store.RestoreChecked): Raft's snapshots, read
// through raftnode's snapshot store. On error the old state stays.
func (f *FSM) RestoreChecked(rc io.ReadCloser) error { return f.restore(rc, f.st.RestoreChecked) }

func (f *FSM) restore(rc io.ReadCloser, restore func(io.Reader) error) error {
	defer rc.Close()
	f.stMu.Lock()
	defer f.stMu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := restore(rc); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := f.load(); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	close(f.changed)
	f.changed = make(chan struct{})
	f.stops.wakeAll()
	f.logger.Info("restored snapshot", "applied_index", f.applied)
	return nil
}

type snapshot struct{ sn *store.Snapshot }

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.sn.WriteTo(sink); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *snapshot) Release() { s.sn.Close() }
