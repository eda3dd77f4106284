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

// clusterProtocol is the protocol whose forms a leader loop may choose:
// the cluster's once every member's is known (raftnode.Node.AwaitProtocol,
// which waits a bounded time for a member not heard from yet rather than
// have the loop choose an older form only because of it), or 1 for a
// proposer that does not say.
func clusterProtocol(ctx context.Context, p Proposer) int {
	if c, ok := p.(interface{ AwaitProtocol(context.Context) int }); ok {
		return c.AwaitProtocol(ctx)
	}
	return 1
}

// chunkedOp is chunked, the form of op whose cascades go in chunks, once
// the cluster runs fsm.ProtocolCascade, and op before.
func chunkedOp(ctx context.Context, p Proposer, op, chunked fsm.Op) fsm.Op {
	if clusterProtocol(ctx, p) >= fsm.ProtocolCascade {
		return chunked
	}
	return op
}

// CascaderState is what the cascader reads of the state.
type CascaderState interface {
	// Cascades lists up to limit cascades under way, oldest first.
	Cascades(limit int) []*store.Cascade
}

// CascaderConfig configures a Cascader.
type CascaderConfig struct {
	// Interval is how often the cascader looks for cascades under way
	// when it found none. Defaults to 100ms.
	Interval time.Duration

	// Proposer and State are required.
	Proposer Proposer
	State    CascaderState
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// DefaultCascaderConfig returns the defaults of a CascaderConfig's timings.
func DefaultCascaderConfig() CascaderConfig {
	return CascaderConfig{Interval: 100 * time.Millisecond}
}

// Validate names the first missing or out-of-bounds field.
func (c *CascaderConfig) Validate() error {
	switch {
	case c.Proposer == nil || c.State == nil:
		return errors.New("leader: CascaderConfig needs Proposer and State")
	case c.Interval <= 0:
		return fmt.Errorf("leader: CascaderConfig.Interval must be positive, got %s", c.Interval)
	}
	return nil
}

// Cascader is the leader's loop that carries cascades in chunks to their
// end (fsm/cascade.go): while one is under way it proposes
// continue_cascade for the oldest, one entry at a time, so that other
// writes wait at most one chunk. A new leader's cascader resumes what the
// last one left, which the state holds.
type Cascader struct {
	cfg CascaderConfig
	run runner
}

// NewCascader checks cfg and returns a Cascader, not yet started.
func NewCascader(cfg CascaderConfig) (*Cascader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Logger = orDiscard(cfg.Logger)
	return &Cascader{cfg: cfg}, nil
}

// Start runs the cascader until ctx ends or Stop: at once (a new leader
// resumes the cascades its predecessor left) and then every Interval it
// continues cascades, chunk after chunk, until none is under way.
func (c *Cascader) Start(ctx context.Context) {
	c.run.start(ctx, func(ctx context.Context) {
		pass := func() {
			for ctx.Err() == nil && c.runOnce(ctx) {
			}
		}
		pass()
		every(ctx, c.cfg.Interval, pass)
	})
}

// Stop ends the cascader and waits for its chunk in progress. Safe twice.
func (c *Cascader) Stop() { c.run.stop() }

// runOnce proposes the next chunk of the oldest cascade under way, and
// reports whether it did (false: none under way, or the proposal failed,
// which the next pass retries; the FSM re-checks every chunk).
func (c *Cascader) runOnce(ctx context.Context) bool {
	cs := c.cfg.State.Cascades(1)
	if len(cs) == 0 {
		return false
	}
	cmd := fsm.Cmd{Op: fsm.OpContinueCascade, ContinueCascade: &fsm.ContinueCascade{ID: cs[0].ID}}
	if _, err := propose(ctx, c.cfg.Proposer, cmd); err != nil {
		c.cfg.Logger.Warn("cascade chunk not applied", "cascade", cs[0].ID, "root", cs[0].Root, "err", err)
		return false
	}
	return true
}
