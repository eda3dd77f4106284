package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/internal/cronspec"
	"github.com/workron/workron/raftnode"
	"github.com/workron/workron/store"
)

// SchedulerConfig configures a Scheduler.
type SchedulerConfig struct {
	// Interval is the longest the scheduler sleeps before it re-reads the
	// schedules (it also wakes for each tick). Defaults to 1s.
	Interval time.Duration
	// Grace is how late a schedule's tick may run and still count as on
	// time; older ticks were missed and follow the schedule's catch-up.
	// Defaults to 10s (a zero grace would miss every tick by a few ms).
	Grace time.Duration
	// MaxCatchup caps how many missed ticks catch-up "all" runs per
	// schedule (the latest ones). Defaults to 100.
	MaxCatchup int

	// Proposer, State and Recorder are required.
	Proposer Proposer
	State    SchedulerState
	Recorder Recorder
	// Logger defaults to discarding; Now to time.Now.
	Logger *slog.Logger
	Now    func() time.Time
}

// DefaultSchedulerConfig returns the defaults of a SchedulerConfig's
// timings.
func DefaultSchedulerConfig() SchedulerConfig {
	return SchedulerConfig{Interval: time.Second, Grace: 10 * time.Second, MaxCatchup: 100}
}

// Validate names the first missing or out-of-bounds field.
func (c *SchedulerConfig) Validate() error {
	switch {
	case c.Proposer == nil || c.State == nil || c.Recorder == nil:
		return errors.New("leader: SchedulerConfig needs Proposer, State and Recorder")
	case c.Interval <= 0:
		return fmt.Errorf("leader: SchedulerConfig.Interval must be positive, got %s", c.Interval)
	case c.Grace < 0:
		return fmt.Errorf("leader: SchedulerConfig.Grace must not be negative, got %s", c.Grace)
	case c.MaxCatchup < 1:
		return fmt.Errorf("leader: SchedulerConfig.MaxCatchup must be at least 1, got %d", c.MaxCatchup)
	}
	return nil
}

// Scheduler is the leader's loop that turns cron schedules into jobs. It
// holds no state of its own worth keeping: every pass reads the replicated
// schedules and computes, from each one's LastTick, the ticks that are due
// (see cronspec.PlanTicks), then proposes fire(schedule, tick) for each, oldest
// first. The FSM creates a tick's job only if the tick is later than the
// schedule's LastTick, so a duplicate or late proposal (a retry after an
// unknown outcome, a deposed leader's last words) is a no-op, and the job id
// is derived from the tick, so no tick makes two jobs. A new leader's first
// pass therefore rebuilds everything from the state and catches up what the
// missing leader did not fire.
type Scheduler struct {
	cfg   SchedulerConfig
	specs map[string]*parsedSpec // by schedule name; parsing is not free
	run   runner
}

// NewScheduler checks cfg and returns a Scheduler, not yet started.
func NewScheduler(cfg SchedulerConfig) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Logger, cfg.Now = orDiscard(cfg.Logger), orNow(cfg.Now)
	return &Scheduler{cfg: cfg}, nil
}

// Start runs the scheduler until ctx ends or Stop; its first pass is at
// once.
func (c *Scheduler) Start(ctx context.Context) { c.run.start(ctx, c.loop) }

// Stop ends the scheduler and waits for its pass in progress. Safe twice.
func (c *Scheduler) Stop() { c.run.stop() }

type parsedSpec struct {
	cron, tz string
	spec     *cronspec.Spec
	err      error
}

// loop fires ticks as they come due until ctx ends. It sleeps until the
// earliest next tick, but never longer than Interval, so that schedules
// created or changed meanwhile are picked up.
func (c *Scheduler) loop(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		wait := c.cfg.Interval
		if next := c.runOnce(ctx); !next.IsZero() {
			wait = min(wait, max(next.Sub(c.cfg.Now()), time.Millisecond))
		}
		t.Reset(wait)
	}
}

// runOnce fires every tick due at the clock's now and returns the earliest
// tick still to come (zero if none). A schedule whose proposal failed is
// left for the next pass, and does not count towards the earliest tick.
func (c *Scheduler) runOnce(ctx context.Context) time.Time {
	if c.specs == nil {
		c.specs = make(map[string]*parsedSpec)
	}
	scheds, err := c.cfg.State.Schedules()
	if err != nil {
		c.cfg.Logger.Error("read schedules", "err", err)
		return time.Time{}
	}
	now := c.cfg.Now()
	var next time.Time
	seen := make(map[string]bool, len(scheds))
	for _, sc := range scheds {
		seen[sc.Name] = true
		if sc.Paused || ctx.Err() != nil {
			continue
		}
		spec, err := c.spec(sc)
		if err != nil {
			continue
		}
		p := cronspec.PlanTicks(spec, time.Unix(0, sc.LastTick), now, c.cfg.Grace, c.catchupKeep(sc.Catchup))
		if !c.fire(ctx, sc, p) {
			continue
		}
		if !p.Next.IsZero() && (next.IsZero() || p.Next.Before(next)) {
			next = p.Next
		}
	}
	for name := range c.specs {
		if !seen[name] {
			delete(c.specs, name)
		}
	}
	return next
}

// spec parses a schedule's cron and zone once per definition. Both were
// checked when the schedule was created, but this node's time zone
// database might lack the zone: that is logged once per definition.
func (c *Scheduler) spec(sc *store.Schedule) (*cronspec.Spec, error) {
	ps := c.specs[sc.Name]
	if ps == nil || ps.cron != sc.Cron || ps.tz != sc.Timezone {
		ps = &parsedSpec{cron: sc.Cron, tz: sc.Timezone}
		ps.spec, ps.err = cronspec.Parse(sc.Cron, sc.Timezone)
		if ps.err != nil {
			c.cfg.Logger.Error("schedule cannot fire on this node", "schedule", sc.Name, "err", ps.err)
		}
		c.specs[sc.Name] = ps
	}
	return ps.spec, ps.err
}

// fire proposes what a plan says, in tick order, and reports whether every
// proposal was answered.
func (c *Scheduler) fire(ctx context.Context, sc *store.Schedule, p cronspec.Plan) bool {
	log := c.cfg.Logger.With("schedule", sc.Name)
	if !p.SkipTo.IsZero() {
		f := &fsm.Fire{Name: sc.Name, Tick: p.SkipTo.UnixNano(), Skip: true, Missed: p.Missed}
		if _, err := propose(ctx, c.cfg.Proposer, fsm.Cmd{Op: fsm.OpFire, Fire: f}); err != nil {
			c.failed(log, f.Tick, err)
			return false
		}
		log.Warn("schedule missed ticks beyond its catch-up", "missed", p.Missed, "catchup", sc.Catchup, "latest_missed", p.SkipTo)
	}
	for _, t := range p.Fire {
		tick := t.UnixNano()
		f := &fsm.Fire{Name: sc.Name, Tick: tick, JobID: fsm.FireJobID(sc.Name, tick, false)}
		res, err := c.proposeFire(ctx, sc, f)
		if err != nil {
			c.failed(log, tick, err)
			return false
		}
		switch {
		case len(res.Jobs) == 1:
			c.cfg.Recorder.JobFired(res.Jobs[0])
			log.Debug("schedule fired", "tick", t, "job", res.Jobs[0].ID, "status", res.Jobs[0].Status)
		case res.Schedule != nil && res.Schedule.LastError != "":
			log.Warn("schedule tick made no job", "tick", t, "err", res.Schedule.LastError)
		default:
			log.Debug("schedule tick not run", "tick", t, "overlap", sc.Overlap)
		}
	}
	return true
}

// proposeFire proposes f, a tick that makes a job, in the trace the
// Recorder starts for it (Fire.TraceParent). A fire the cluster refuses
// for its trace (a member joined that runs a protocol before traces) is
// proposed again without it: a tick is never lost for its trace.
func (c *Scheduler) proposeFire(ctx context.Context, sc *store.Schedule, f *fsm.Fire) (fsm.Result, error) {
	end := c.cfg.Recorder.TraceFire(ctx, sc, f)
	res, err := propose(ctx, c.cfg.Proposer, fsm.Cmd{Op: fsm.OpFire, Fire: f})
	if f.TraceParent != "" && errors.Is(err, raftnode.ErrNeedsUpgrade) {
		f.TraceParent = ""
		res, err = propose(ctx, c.cfg.Proposer, fsm.Cmd{Op: fsm.OpFire, Fire: f})
	}
	end(res, err)
	return res, err
}

func (c *Scheduler) failed(log *slog.Logger, tick int64, err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, fsm.ErrScheduleNotFound) {
		return // leadership lost, or the schedule was deleted meanwhile
	}
	log.Warn("schedule fire failed; retrying next pass", "tick", time.Unix(0, tick), "err", err)
}

// catchupKeep is how many missed ticks a schedule's catch-up policy runs.
func (c *Scheduler) catchupKeep(catchup string) int {
	switch catchup {
	case fsm.CatchupOne:
		return 1
	case fsm.CatchupAll:
		return c.cfg.MaxCatchup
	}
	return 0
}
