package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/workron/workron/fsm"
)

// reapBatch is the most expiries the reaper proposes per pass.
const reapBatch = 512

// ReaperConfig configures a Reaper.
type ReaperConfig struct {
	// Interval is how often the reaper looks for expired leases. Defaults
	// to 1s.
	Interval time.Duration
	// LeaseTTL is how long a lease lasts without a heartbeat; a new leader
	// waits this long before its first pass. Defaults to 30s.
	LeaseTTL time.Duration

	// Proposer, State and Recorder are required.
	Proposer Proposer
	State    ReaperState
	Recorder Recorder
	// Logger defaults to discarding; Now to time.Now.
	Logger *slog.Logger
	Now    func() time.Time
}

// DefaultReaperConfig returns the defaults of a ReaperConfig's timings.
func DefaultReaperConfig() ReaperConfig {
	return ReaperConfig{Interval: time.Second, LeaseTTL: 30 * time.Second}
}

// Validate names the first missing or out-of-bounds field.
func (c *ReaperConfig) Validate() error {
	switch {
	case c.Proposer == nil || c.State == nil || c.Recorder == nil:
		return errors.New("leader: ReaperConfig needs Proposer, State and Recorder")
	case c.Interval <= 0:
		return fmt.Errorf("leader: ReaperConfig.Interval must be positive, got %s", c.Interval)
	case c.LeaseTTL < 10*time.Millisecond:
		return fmt.Errorf("leader: ReaperConfig.LeaseTTL must be at least 10ms, got %s", c.LeaseTTL)
	}
	return nil
}

// Reaper is the leader's loop that expires leases past their deadline. It
// only proposes: the FSM re-checks each lease and deadline when it applies,
// so a heartbeat that won the race wins. A new leader waits one lease period
// before its first pass, so workers whose heartbeats were lost to the
// election get a full fresh period.
type Reaper struct {
	cfg   ReaperConfig
	since time.Time // when leadership began; zero: long ago
	run   runner
}

// NewReaper checks cfg and returns a Reaper, not yet started.
func NewReaper(cfg ReaperConfig) (*Reaper, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Logger, cfg.Now = orDiscard(cfg.Logger), orNow(cfg.Now)
	return &Reaper{cfg: cfg}, nil
}

// Start runs the reaper until ctx ends or Stop; its first pass comes one
// LeaseTTL after leadership began (see Leadership) or after Start.
func (r *Reaper) Start(ctx context.Context) {
	if r.since.IsZero() {
		r.since = time.Now()
	}
	r.run.start(ctx, func(ctx context.Context) {
		every(ctx, r.cfg.Interval, func() { r.runOnce(ctx) })
	})
}

// Stop ends the reaper and waits for its pass in progress. Safe twice.
func (r *Reaper) Stop() { r.run.stop() }

// runOnce proposes an expiry for every lease past its deadline (up to
// reapBatch) and returns how many the FSM accepted.
func (r *Reaper) runOnce(ctx context.Context) int {
	if time.Since(r.since) < r.cfg.LeaseTTL {
		return 0
	}
	expired := r.cfg.State.Expired(r.cfg.Now().UnixNano(), reapBatch)
	if len(expired) == 0 {
		return 0
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		accepted int
	)
	for _, l := range expired {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := propose(ctx, r.cfg.Proposer, fsm.Cmd{Op: fsm.OpExpire, Expire: &fsm.Expire{JobID: l.JobID, Lease: l.Lease, Draw: draw(),
				Chunked: clusterProtocol(ctx, r.cfg.Proposer) >= fsm.ProtocolCascade}})
			if err != nil {
				return
			}
			r.cfg.Recorder.AttemptEnded(ctx, res.Jobs[0], true)
			mu.Lock()
			accepted++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return accepted
}
