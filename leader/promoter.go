package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/workron/workron/raftnode"
)

// Members is what the promoter reads and changes of the Raft
// configuration (*raftnode.Node implements it).
type Members interface {
	// Servers lists the configuration's members.
	Servers() ([]raftnode.Server, error)
	// Promote makes a non-voter a voter; a voter is left as it is.
	Promote(ctx context.Context, id string) error
	// CommitIndex is the leader's commit index.
	CommitIndex() uint64
}

// Progress says how far a member has applied the log, as the member itself
// reports it (api.Server asks its GET /health at the HTTP address the state
// records for it). An error means not known: no address recorded yet, no
// answer, or an answer from another node.
type Progress interface {
	AppliedIndexOf(ctx context.Context, id string) (uint64, error)
}

// PromoterConfig configures the promoter, which makes the non-voters a join
// added (POST /cluster/join adds a node as a non-voter) voters once they
// have caught up with the log.
type PromoterConfig struct {
	// Interval is how often the promoter looks at the configuration.
	// Defaults to 250ms.
	Interval time.Duration
	// Within is how long, counted from when this leader first saw a
	// non-voter, the promoter looks at it every Interval; after that it
	// logs that the node is late and looks only every LateInterval (a node
	// that never catches up costs a probe now and then, and one that
	// catches up late still becomes a voter). Defaults to 15m.
	Within time.Duration
	// LateInterval is how often it looks at a non-voter past Within.
	// Defaults to 10s.
	LateInterval time.Duration

	// Members and Progress are required.
	Members  Members
	Progress Progress
	// Logger defaults to discarding. Now defaults to time.Now.
	Logger *slog.Logger
	Now    func() time.Time
}

// DefaultPromoterConfig returns the promoter's default timings.
func DefaultPromoterConfig() PromoterConfig {
	return PromoterConfig{Interval: 250 * time.Millisecond, Within: 15 * time.Minute, LateInterval: 10 * time.Second}
}

// Validate names the first missing or out-of-bounds field.
func (c *PromoterConfig) Validate() error {
	switch {
	case c.Members == nil || c.Progress == nil:
		return errors.New("leader: PromoterConfig needs Members and Progress")
	case c.Interval < time.Millisecond || c.Interval > time.Minute:
		return fmt.Errorf("leader: PromoterConfig.Interval %s: must be 1ms..1m", c.Interval)
	case c.Within < c.Interval || c.Within > 24*time.Hour:
		return fmt.Errorf("leader: PromoterConfig.Within %s: must be Interval..24h", c.Within)
	case c.LateInterval < c.Interval || c.LateInterval > time.Hour:
		return fmt.Errorf("leader: PromoterConfig.LateInterval %s: must be Interval..1h", c.LateInterval)
	}
	return nil
}

// Promoter promotes caught-up non-voters, one leadership term at a time.
//
// A non-voter has caught up when the applied index it reports has reached
// the leader's commit index as of when this leader first saw it in the
// configuration (so after it was added). A node whose applied index is not
// known (no address, no answer) is not promoted; a voter is never touched
// (raftnode.Node.Promote leaves voters alone, and re-reads the
// configuration under its lock of configuration changes). A new leader starts over with the
// non-voters it finds, so a promotion survives a leader change.
type Promoter struct {
	cfg     PromoterConfig
	logger  *slog.Logger
	run     runner
	pending map[string]*catchup // by node id; touched only by the loop
}

// catchup is what the promoter knows of one non-voter this term.
type catchup struct {
	target uint64    // the commit index it must reach
	since  time.Time // when this leader first saw it
	late   bool      // past Within: logged, looked at every LateInterval
	looked time.Time // when its progress was last asked for
}

// NewPromoter checks cfg and returns a Promoter.
func NewPromoter(cfg PromoterConfig) (*Promoter, error) {
	cfg.Logger, cfg.Now = orDiscard(cfg.Logger), orNow(cfg.Now)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Promoter{cfg: cfg, logger: cfg.Logger, pending: make(map[string]*catchup)}, nil
}

// Start runs the promoter until ctx ends or Stop.
func (p *Promoter) Start(ctx context.Context) {
	p.run.start(ctx, func(ctx context.Context) {
		p.runOnce(ctx)
		every(ctx, p.cfg.Interval, func() { p.runOnce(ctx) })
	})
}

// Stop stops the promoter and waits for it.
func (p *Promoter) Stop() { p.run.stop() }

// runOnce looks at every non-voter once and promotes those caught up.
func (p *Promoter) runOnce(ctx context.Context) {
	servers, err := p.cfg.Members.Servers()
	if err != nil {
		p.logger.Warn("read the configuration", "err", err)
		return
	}
	seen := make(map[string]bool, len(servers))
	for _, s := range servers {
		if s.Voter {
			continue
		}
		seen[s.ID] = true
		p.consider(ctx, s.ID)
	}
	for id := range p.pending {
		if !seen[id] {
			delete(p.pending, id)
		}
	}
}

// consider promotes the non-voter id if it has caught up.
func (p *Promoter) consider(ctx context.Context, id string) {
	now := p.cfg.Now()
	c := p.pending[id]
	if c == nil {
		c = &catchup{target: p.cfg.Members.CommitIndex(), since: now}
		p.pending[id] = c
		p.logger.Info("non-voter waits to catch up before it votes", "node", id, "target_index", c.target)
	}
	if !c.late && now.Sub(c.since) > p.cfg.Within {
		c.late = true
		p.logger.Warn("non-voter has not caught up: the leader now looks at it less often", "node", id,
			"within", p.cfg.Within, "every", p.cfg.LateInterval, "target_index", c.target)
	}
	if c.late && now.Sub(c.looked) < p.cfg.LateInterval {
		return
	}
	c.looked = now
	applied, err := p.cfg.Progress.AppliedIndexOf(ctx, id)
	if err != nil {
		p.logger.Debug("non-voter's progress not known yet", "node", id, "err", err)
		return
	}
	if applied < c.target {
		p.logger.Debug("non-voter catching up", "node", id, "applied_index", applied, "target_index", c.target)
		return
	}
	pctx, cancel := context.WithTimeout(ctx, proposeTimeout)
	defer cancel()
	if err := p.cfg.Members.Promote(pctx, id); err != nil {
		p.logger.Warn("promote non-voter", "node", id, "err", err)
		return
	}
	delete(p.pending, id)
	p.logger.Info("non-voter caught up: now a voter", "node", id, "applied_index", applied,
		"took", now.Sub(c.since).Round(time.Millisecond).String())
}
