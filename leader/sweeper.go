package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/workron/workron/fsm"
)

// sweepBatch is the most jobs one delete command removes.
const sweepBatch = 1000

// SweeperConfig configures a Sweeper.
type SweeperConfig struct {
	// Interval is how often the sweeper deletes expired finished jobs.
	// Defaults to 1m.
	Interval time.Duration
	// KeepFailed is the least time a failed or cancelled job is kept after
	// it finished, however short its own retention; 0 keeps each job its
	// own retention. The deletes carry it (fsm.Delete.KeepFailed), so every
	// replica applies the leader's. Defaults to 168h.
	KeepFailed time.Duration

	// Proposer and State are required.
	Proposer Proposer
	State    SweeperState
	// Logger defaults to discarding; Now to time.Now.
	Logger *slog.Logger
	Now    func() time.Time
}

// DefaultSweeperConfig returns the defaults of a SweeperConfig's timings.
func DefaultSweeperConfig() SweeperConfig {
	return SweeperConfig{Interval: time.Minute, KeepFailed: DefaultKeepFailed}
}

// DefaultKeepFailed is SweeperConfig.KeepFailed's default: failed and
// cancelled jobs are kept a week, to look into, while done ones go at
// their own retention (a day by default, the API's).
const DefaultKeepFailed = 7 * 24 * time.Hour

// Validate names the first missing or out-of-bounds field.
func (c *SweeperConfig) Validate() error {
	switch {
	case c.Proposer == nil || c.State == nil:
		return errors.New("leader: SweeperConfig needs Proposer and State")
	case c.Interval <= 0:
		return fmt.Errorf("leader: SweeperConfig.Interval must be positive, got %s", c.Interval)
	case c.KeepFailed < 0:
		return fmt.Errorf("leader: SweeperConfig.KeepFailed must not be negative, got %s", c.KeepFailed)
	}
	return nil
}

// Sweeper is the leader's loop that deletes finished jobs whose retention
// ran out, in batched commands, so history never grows the replicated state
// without bound. The FSM re-checks each job's expiry when it applies. It
// also prunes the token buckets of concurrency keys gone idle (full again),
// which change no claim's decision (fsm.PruneBuckets), once the cluster
// runs protocol 3.
type Sweeper struct {
	cfg SweeperConfig
	run runner
	// pruneBatch is the buckets one prune_buckets visits; tests lower it.
	pruneBatch int
}

// NewSweeper checks cfg and returns a Sweeper, not yet started.
func NewSweeper(cfg SweeperConfig) (*Sweeper, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Logger, cfg.Now = orDiscard(cfg.Logger), orNow(cfg.Now)
	return &Sweeper{cfg: cfg, pruneBatch: fsm.MaxPruneBuckets}, nil
}

// Start runs the sweeper until ctx ends or Stop: every Interval it deletes
// batches until one comes back short, then prunes idle key buckets.
func (w *Sweeper) Start(ctx context.Context) {
	w.run.start(ctx, func(ctx context.Context) {
		every(ctx, w.cfg.Interval, func() {
			for n := sweepBatch; n == sweepBatch && ctx.Err() == nil; {
				n = w.sweep(ctx)
			}
			w.prune(ctx)
		})
	})
}

// Stop ends the sweeper and waits for its pass in progress. Safe twice.
func (w *Sweeper) Stop() { w.run.stop() }

// runOnce proposes one delete of up to sweepBatch expired jobs and returns
// how many the FSM removed.
func (w *Sweeper) runOnce(ctx context.Context) int { return w.sweepResult(ctx).Deleted }

// sweep proposes one delete and returns how many jobs it dealt with:
// removed, or kept by KeepFailed (their expiry moved past the batch).
func (w *Sweeper) sweep(ctx context.Context) int {
	res := w.sweepResult(ctx)
	return res.Deleted + res.Kept
}

// sweepResult proposes one delete of up to sweepBatch expired jobs, with
// the KeepFailed floor. While a member runs a protocol before
// fsm.ProtocolKeepFailed the proposer refuses it and nothing is deleted
// until the upgrade ends: a plain delete would remove failed jobs the
// floor keeps.
func (w *Sweeper) sweepResult(ctx context.Context) fsm.Result {
	ids := w.cfg.State.ExpiredJobs(w.cfg.Now().UnixNano(), sweepBatch)
	if len(ids) == 0 {
		return fsm.Result{}
	}
	del := &fsm.Delete{IDs: ids, KeepFailed: int64(w.cfg.KeepFailed)}
	res, err := propose(ctx, w.cfg.Proposer, fsm.Cmd{Op: fsm.OpDelete, Delete: del})
	if err != nil {
		w.cfg.Logger.Warn("retention sweep", "err", err)
		return fsm.Result{}
	}
	w.cfg.Logger.Debug("retention sweep", "deleted", res.Deleted, "kept", res.Kept)
	return res
}

// prune proposes prune_buckets, each starting where the last stopped,
// until one reaches the last bucket, and returns how many buckets they
// deleted. While a member runs a protocol before 3 the proposer refuses the
// command (raftnode.ErrNeedsUpgrade) and the pass ends: the next sweep
// tries again.
func (w *Sweeper) prune(ctx context.Context) int {
	if w.cfg.State.KeyBuckets() == 0 {
		return 0
	}
	var after []byte
	total := 0
	for ctx.Err() == nil {
		cmd := fsm.Cmd{Op: fsm.OpPruneBuckets, PruneBuckets: &fsm.PruneBuckets{After: after, Limit: w.pruneBatch}}
		res, err := propose(ctx, w.cfg.Proposer, cmd)
		if err != nil {
			w.cfg.Logger.Debug("bucket prune not applied", "err", err)
			break
		}
		total += res.Deleted
		if res.Next == nil {
			break
		}
		after = res.Next
	}
	if total > 0 {
		w.cfg.Logger.Debug("bucket prune", "deleted", total)
	}
	return total
}
