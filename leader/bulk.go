package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// BulkerState is what the bulk loop reads of the state.
type BulkerState interface {
	// Bulks lists the bulk actions kept, oldest first.
	Bulks() []*store.Bulk
	// ListJobs returns a page of jobs, newest first (store.ListQuery).
	ListJobs(q store.ListQuery) ([]*store.Job, uint64, error)
	// Journal returns the totals of a job's journal of durable steps.
	Journal(jobID string) (store.JournalTotals, error)
}

// Compile turns a bulk action's selector text into the query its walk
// reads (the indexes the selector allows and the test each job must pass),
// as of now (Unix nanoseconds): the API's selector compiler
// (api.CompileSelector), which node hands to the loop, so that the API and
// the walk read one language.
type Compile func(text string, now int64) (store.ListQuery, error)

// BulkerConfig configures a Bulker.
type BulkerConfig struct {
	// Interval is how often the bulk loop looks for running actions when
	// it found none. Defaults to 100ms.
	Interval time.Duration
	// Chunk is the most jobs one step names (at most fsm.MaxBulkChunk).
	// Defaults to 100: a write that arrives while a step applies waits
	// for it, so a smaller step keeps other writes' latency down.
	Chunk int
	// Rest is how long the loop rests after each pass that moved, as a
	// multiple of how long the pass took (0: none), so that bulk steps
	// take at most 1/(1+Rest) of the leader's time and other writes
	// find the log free the rest of it. Defaults to 2.
	Rest float64
	// Scan is the most jobs one step's walk reads, matching or not, so
	// that a selector that matches few jobs still moves in bounded
	// steps. Defaults to 20,000.
	Scan int

	// Proposer, State and Compile are required.
	Proposer Proposer
	State    BulkerState
	Compile  Compile
	// Logger defaults to discarding. Now defaults to time.Now.
	Logger *slog.Logger
	Now    func() time.Time
}

// DefaultBulkerConfig returns the defaults of a BulkerConfig's timings and
// bounds.
func DefaultBulkerConfig() BulkerConfig {
	return BulkerConfig{Interval: 100 * time.Millisecond, Chunk: 100, Rest: 2, Scan: 20_000}
}

// Validate names the first missing or out-of-bounds field.
func (c *BulkerConfig) Validate() error {
	switch {
	case c.Proposer == nil || c.State == nil || c.Compile == nil:
		return errors.New("leader: BulkerConfig needs Proposer, State and Compile")
	case c.Interval <= 0:
		return fmt.Errorf("leader: BulkerConfig.Interval must be positive, got %s", c.Interval)
	case c.Chunk < 1 || c.Chunk > fsm.MaxBulkChunk:
		return fmt.Errorf("leader: BulkerConfig.Chunk must be 1 to %d, got %d", fsm.MaxBulkChunk, c.Chunk)
	case c.Rest < 0 || c.Rest > 100:
		return fmt.Errorf("leader: BulkerConfig.Rest must be 0 to 100, got %v", c.Rest)
	case c.Scan < c.Chunk:
		return fmt.Errorf("leader: BulkerConfig.Scan must be at least Chunk (%d), got %d", c.Chunk, c.Scan)
	}
	return nil
}

// Bulker is the leader's loop that carries bulk actions (fsm/bulk.go) to
// their end: for each running action in turn it walks the jobs its
// selector matches below its cursor and proposes one bulk_step, one entry
// at a time, so that other writes wait at most one chunk. The cursor and
// counts live in the state, so a new leader's Bulker resumes where the
// last applied step left off, and a step proposed twice changes nothing.
type Bulker struct {
	cfg BulkerConfig
	run runner
}

// NewBulker checks cfg and returns a Bulker, not yet started.
func NewBulker(cfg BulkerConfig) (*Bulker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Logger, cfg.Now = orDiscard(cfg.Logger), orNow(cfg.Now)
	return &Bulker{cfg: cfg}, nil
}

// Start runs the loop until ctx ends or Stop: at once (a new leader
// resumes its predecessor's actions) and then every Interval, step after
// step, resting Rest times each pass's time between them, until no action
// is running.
func (b *Bulker) Start(ctx context.Context) {
	b.run.start(ctx, func(ctx context.Context) {
		pass := func() {
			for ctx.Err() == nil {
				start := time.Now()
				if !b.runOnce(ctx) {
					return
				}
				rest(ctx, time.Duration(b.cfg.Rest*float64(time.Since(start))))
			}
		}
		pass()
		every(ctx, b.cfg.Interval, pass)
	})
}

// Stop ends the loop and waits for its step in progress. Safe twice.
func (b *Bulker) Stop() { b.run.stop() }

// runOnce proposes one step of each running action, and reports whether
// any applied (false: none running, or every proposal failed, which the
// next pass retries).
func (b *Bulker) runOnce(ctx context.Context) bool {
	moved := false
	for _, op := range b.cfg.State.Bulks() {
		if ctx.Err() != nil {
			return false
		}
		if op.State == store.BulkRunning && b.step(ctx, op) {
			moved = true
		}
	}
	return moved
}

// step proposes the next chunk of op and reports whether it applied.
func (b *Bulker) step(ctx context.Context, op *store.Bulk) bool {
	q, err := b.cfg.Compile(op.Selector, b.cfg.Now().UnixNano())
	if err != nil {
		// The selector was accepted when the action was created: a
		// release that reads it otherwise ends the action, visibly.
		b.cfg.Logger.Warn("bulk action's selector no longer compiles: stopping it", "bulk", op.ID, "err", err)
		_, _ = propose(ctx, b.cfg.Proposer, fsm.Cmd{Op: fsm.OpBulkStop, BulkStop: &fsm.BulkStop{ID: op.ID}})
		return false
	}
	q.Status, q.Before, q.Limit, q.Scan, q.ScanBytes = op.Status, op.Cursor, b.cfg.Chunk, b.cfg.Scan, 64<<20
	jobs, next, err := b.cfg.State.ListJobs(q)
	if err != nil {
		b.cfg.Logger.Warn("bulk action's walk failed", "bulk", op.ID, "err", err)
		return false
	}
	st := &fsm.BulkStep{ID: op.ID, From: op.Cursor, Next: next}
	size, steps := 0, 0
	for i, j := range jobs {
		size += len(j.ID)
		if op.Action == fsm.BulkDelete {
			// A job's journal is deleted with it, key by key: a step
			// deletes at most MaxDeleteStepKeys of them (and one job).
			if t, err := b.cfg.State.Journal(j.ID); err == nil {
				steps += int(t.Steps)
			}
		}
		if i > 0 && (size > fsm.MaxBulkChunkBytes || steps > fsm.MaxDeleteStepKeys()) {
			st.Next = jobs[i-1].Seq // the walk goes on below the last id named
			break
		}
		st.IDs = append(st.IDs, j.ID)
	}
	if st.Next != 0 && st.Next >= st.From {
		b.cfg.Logger.Error("bulk action's walk did not move", "bulk", op.ID, "cursor", op.Cursor, "next", st.Next)
		return false
	}
	if _, err := propose(ctx, b.cfg.Proposer, fsm.Cmd{Op: fsm.OpBulkStep, BulkStep: st}); err != nil {
		b.cfg.Logger.Warn("bulk step not applied", "bulk", op.ID, "err", err)
		return false
	}
	return true
}

// rest waits d, or until ctx ends.
func rest(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
