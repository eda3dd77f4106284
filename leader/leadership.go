package leader

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Config configures Leadership: the timings of each loop, and the
// dependencies they share, which Leadership hands to each.
type Config struct {
	// Reaper, Sweeper, Scheduler and Admission give each loop's timings;
	// their dependency fields are ignored (the shared ones below are
	// used). Admission.WorkerOfflineAfter defaults to 3 Reaper.LeaseTTLs.
	Reaper    ReaperConfig
	Sweeper   SweeperConfig
	Scheduler SchedulerConfig
	Admission AdmissionConfig
	Cascader  CascaderConfig
	// Bulker gives the bulk loop's timings and bounds, and its Compile
	// (required: node passes the API's selector compiler).
	Bulker BulkerConfig
	// Promoter gives the promoter's timings; it runs when Members and
	// Progress are both set.
	Promoter PromoterConfig

	// Proposer, State, Recorder and Liveness are required.
	Proposer Proposer
	State    State
	Recorder Recorder
	Liveness Liveness
	// Members and Progress, when both set, start the promoter, which
	// makes joined non-voters voters once they have caught up (node sets
	// them; tests of other loops may leave them out).
	Members  Members
	Progress Progress
	// Establish, when set, runs first on gaining leadership, before any
	// loop starts (the API records this node's address in the state).
	Establish func(ctx context.Context)
	// Logger receives the loops' logs, each with its component. Defaults
	// to discarding them.
	Logger *slog.Logger
	// Now is the clock the loops decide by; the node passes its cluster
	// time (raftnode.Node.Now). Defaults to time.Now.
	Now func() time.Time
}

// DefaultConfig returns a Config with every loop's timings at their
// defaults.
func DefaultConfig() Config {
	return Config{
		Reaper:    DefaultReaperConfig(),
		Sweeper:   DefaultSweeperConfig(),
		Scheduler: DefaultSchedulerConfig(),
		Admission: DefaultAdmissionConfig(),
		Cascader:  DefaultCascaderConfig(),
		Bulker:    DefaultBulkerConfig(),
		Promoter:  DefaultPromoterConfig(),
	}
}

// Validate names the first missing or out-of-bounds field.
func (c *Config) Validate() error {
	if c.Proposer == nil || c.State == nil || c.Recorder == nil || c.Liveness == nil {
		return errors.New("leader: Config needs Proposer, State, Recorder and Liveness")
	}
	_, err := c.loops(time.Time{})
	return err
}

// Leadership starts the loops when this node gains leadership and stops
// them when it loses it (Run). It holds nothing between terms: each term
// gets new loops, which rebuild what they need from the state.
type Leadership struct {
	cfg    Config
	logger *slog.Logger
}

// New checks cfg and returns a Leadership to pass to the Raft node.
func New(cfg Config) (*Leadership, error) {
	cfg.Logger, cfg.Now = orDiscard(cfg.Logger), orNow(cfg.Now)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Leadership{cfg: cfg, logger: cfg.Logger.With("component", "leader")}, nil
}

// loop is what Leadership starts and stops.
type loop interface {
	Start(ctx context.Context)
	Stop()
}

// Run is one term of leadership; pass it to the node as
// raftnode.Config.OnLeader, which calls it once the node leads and has
// applied every committed entry, and cancels ctx when leadership is lost.
// It runs Establish, starts every loop, and when ctx ends stops them and
// waits for each before it returns.
func (l *Leadership) Run(ctx context.Context) {
	since := time.Now()
	l.logger.Info("leading: reaper starts after one lease period", "lease_ttl", l.cfg.Reaper.LeaseTTL)
	if l.cfg.Establish != nil {
		l.cfg.Establish(ctx)
	}
	loops, err := l.cfg.loops(since)
	if err != nil { // Validate built them once already
		l.logger.Error("leader loops not started", "err", err)
		return
	}
	for _, lp := range loops {
		lp.Start(ctx)
	}
	<-ctx.Done()
	for _, lp := range loops {
		lp.Stop()
	}
}

// loops builds one term's loops, their first passes counted from since.
func (c *Config) loops(since time.Time) ([]loop, error) {
	logger := orDiscard(c.Logger)
	rc := c.Reaper
	rc.Proposer, rc.State, rc.Recorder, rc.Logger, rc.Now = c.Proposer, c.State, c.Recorder, logger.With("component", "reaper"), c.Now
	sw := c.Sweeper
	sw.Proposer, sw.State, sw.Logger, sw.Now = c.Proposer, c.State, logger.With("component", "sweeper"), c.Now
	sc := c.Scheduler
	sc.Proposer, sc.State, sc.Recorder, sc.Logger, sc.Now = c.Proposer, c.State, c.Recorder, logger.With("component", "scheduler"), c.Now
	ac := c.Admission
	if ac.WorkerOfflineAfter == 0 {
		ac.WorkerOfflineAfter = 3 * rc.LeaseTTL
	}
	ac.Proposer, ac.State, ac.Liveness, ac.Logger, ac.Now = c.Proposer, c.State, c.Liveness, logger.With("component", "admission"), c.Now
	cc := c.Cascader
	cc.Proposer, cc.State, cc.Logger = c.Proposer, c.State, logger.With("component", "cascader")
	cs, err := NewCascader(cc)
	if err != nil {
		return nil, err
	}
	bc := c.Bulker
	bc.Proposer, bc.State, bc.Logger, bc.Now = c.Proposer, c.State, logger.With("component", "bulker"), c.Now
	bk, err := NewBulker(bc)
	if err != nil {
		return nil, err
	}
	r, err := NewReaper(rc)
	if err != nil {
		return nil, err
	}
	w, err := NewSweeper(sw)
	if err != nil {
		return nil, err
	}
	s, err := NewScheduler(sc)
	if err != nil {
		return nil, err
	}
	a, err := NewAdmission(ac)
	if err != nil {
		return nil, err
	}
	r.since, a.since = since, since
	loops := []loop{r, w, s, a, cs, bk}
	if c.Members != nil && c.Progress != nil {
		pc := c.Promoter
		pc.Members, pc.Progress, pc.Logger, pc.Now = c.Members, c.Progress, logger.With("component", "promoter"), c.Now
		pr, err := NewPromoter(pc)
		if err != nil {
			return nil, err
		}
		loops = append(loops, pr)
	}
	return loops, nil
}
