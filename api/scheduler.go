package api

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// scheduler is the leader's loop that turns cron schedules into jobs. It
// holds no state of its own worth keeping: every pass reads the replicated
// schedules and computes, from each one's LastTick, the ticks that are due
// (see planTicks), then proposes fire(schedule, tick) for each, oldest
// first. The FSM creates a tick's job only if the tick is later than the
// schedule's LastTick, so a duplicate or late proposal (a retry after an
// unknown outcome, a deposed leader's last words) is a no-op, and the job id
// is derived from the tick, so no tick makes two jobs. A new leader's first
// pass therefore rebuilds everything from the state and catches up what the
// missing leader did not fire.
type scheduler struct {
	s     *Server
	specs map[string]*parsedSpec // by schedule name; parsing is not free
}

type parsedSpec struct {
	cron, tz string
	spec     *cronSpec
	err      error
}

// run fires ticks as they come due until ctx ends. It sleeps until the
// earliest next tick, but never longer than ScheduleInterval, so that
// schedules created or changed meanwhile are picked up.
func (c *scheduler) run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		wait := c.s.cfg.ScheduleInterval
		if next := c.runOnce(ctx); !next.IsZero() {
			wait = min(wait, max(next.Sub(c.s.cfg.Now()), time.Millisecond))
		}
		t.Reset(wait)
	}
}

// runOnce fires every tick due at the clock's now and returns the earliest
// tick still to come (zero if none). A schedule whose proposal failed is
// left for the next pass, and does not count towards the earliest tick.
func (c *scheduler) runOnce(ctx context.Context) time.Time {
	if c.specs == nil {
		c.specs = make(map[string]*parsedSpec)
	}
	scheds, err := c.s.state.Schedules()
	if err != nil {
		c.s.logger.Error("read schedules", "err", err)
		return time.Time{}
	}
	now := c.s.cfg.Now()
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
		p := planTicks(spec, time.Unix(0, sc.LastTick), now, c.s.cfg.ScheduleGrace, sc.Catchup, c.s.cfg.ScheduleMaxCatchup)
		if !c.fire(ctx, sc, p) {
			continue
		}
		if !p.next.IsZero() && (next.IsZero() || p.next.Before(next)) {
			next = p.next
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
func (c *scheduler) spec(sc *store.Schedule) (*cronSpec, error) {
	ps := c.specs[sc.Name]
	if ps == nil || ps.cron != sc.Cron || ps.tz != sc.Timezone {
		ps = &parsedSpec{cron: sc.Cron, tz: sc.Timezone}
		ps.spec, ps.err = parseCron(sc.Cron, sc.Timezone)
		if ps.err != nil {
			c.s.logger.Error("schedule cannot fire on this node", "schedule", sc.Name, "err", ps.err)
		}
		c.specs[sc.Name] = ps
	}
	return ps.spec, ps.err
}

// fire proposes what a plan says, in tick order, and reports whether every
// proposal was answered.
func (c *scheduler) fire(ctx context.Context, sc *store.Schedule, p tickPlan) bool {
	log := c.s.logger.With("schedule", sc.Name)
	if !p.skipTo.IsZero() {
		f := &fsm.Fire{Name: sc.Name, Tick: p.skipTo.UnixNano(), Skip: true, Missed: p.missed}
		if _, err := c.s.propose(ctx, fsm.Cmd{Op: fsm.OpFire, Fire: f}); err != nil {
			c.failed(log, f.Tick, err)
			return false
		}
		log.Warn("schedule missed ticks beyond its catch-up", "missed", p.missed, "catchup", sc.Catchup, "latest_missed", p.skipTo)
	}
	for _, t := range p.fire {
		tick := t.UnixNano()
		f := &fsm.Fire{Name: sc.Name, Tick: tick, JobID: fsm.FireJobID(sc.Name, tick, false)}
		res, err := c.s.propose(ctx, fsm.Cmd{Op: fsm.OpFire, Fire: f})
		if err != nil {
			c.failed(log, tick, err)
			return false
		}
		switch {
		case len(res.Jobs) == 1:
			c.s.metrics.submitted.WithLabelValues(res.Jobs[0].Queue).Inc()
			log.Debug("schedule fired", "tick", t, "job", res.Jobs[0].ID, "status", res.Jobs[0].Status)
		case res.Schedule != nil && res.Schedule.LastError != "":
			log.Warn("schedule tick made no job", "tick", t, "err", res.Schedule.LastError)
		default:
			log.Debug("schedule tick not run", "tick", t, "overlap", sc.Overlap)
		}
	}
	return true
}

func (c *scheduler) failed(log *slog.Logger, tick int64, err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, fsm.ErrScheduleNotFound) {
		return // leadership lost, or the schedule was deleted meanwhile
	}
	log.Warn("schedule fire failed; retrying next pass", "tick", time.Unix(0, tick), "err", err)
}
