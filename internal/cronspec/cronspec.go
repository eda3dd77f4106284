// Package cronspec parses cron schedules and plans their ticks: which
// ticks after a schedule's last one run now, which were missed, and when
// the next one comes. It reads no clock (callers pass now) and proposes
// nothing; the API validates schedules with it and the leader's scheduler
// (leader) fires what it plans.
package cronspec

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// cronParser reads standard 5-field cron, an optional leading seconds field,
// and the @ shortcuts (@hourly, @daily, @every 30s, …).
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// allHours is the hour field of a schedule that fires in every hour.
const allHours = 1<<24 - 1

// Error is a schedule's bad field: Field is "cron" or "timezone", Reason
// says why. The API answers it as any invalid field.
type Error struct {
	Field  string
	Reason string
}

func (e *Error) Error() string { return e.Field + ": " + e.Reason }

// invalid is the error of a bad field.
func invalid(field, format string, args ...any) error {
	return &Error{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// maxWallSteps bounds the search for a wall-clock time that has not passed
// yet: only the repeated hour of a fall-back transition needs more than one
// step, at most one per second of it.
const maxWallSteps = 4000

// Spec is a parsed schedule: when it fires, and in which zone.
//
// Daylight saving time: a spec that fires in every hour (`*/5 * * * *`,
// `@hourly`) and `@every` follow real time, so a transition neither skips
// nor repeats an interval: in the repeated hour of a fall-back the minutes
// fire again (they are other instants), and the hour skipped by a spring
// forward holds no instant to fire at. A spec with fixed hours (`30 2 * * *`,
// `@daily`) names wall-clock times, each of which runs once: a time that
// occurs twice (fall back) runs at its first occurrence only; a time that
// does not exist (spring forward) runs at the instant the clocks jump, once
// for the whole gap. Such specs are stepped in wall-clock time (see Next).
type Spec struct {
	sched cron.Schedule
	loc   *time.Location
	wall  bool // fixed hours: sched runs on wall-clock time as if in UTC
}

// Parse checks a cron expression and a time zone ("" is UTC) and
// returns the schedule they make. Errors are *Error naming
// the field at fault ("cron" or "timezone").
func Parse(expr, tz string) (*Spec, error) {
	if tz == "" {
		tz = "UTC"
	}
	if tz == "Local" {
		return nil, invalid("timezone", "\"Local\" differs from node to node; give an IANA name like Europe/Paris")
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, invalid("timezone", "%q is not a known time zone; give an IANA name like Europe/Paris", tz)
	}
	expr = strings.TrimSpace(expr)
	switch {
	case expr == "":
		return nil, invalid("cron", "must not be empty")
	case strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ="):
		return nil, invalid("cron", "give the time zone in the timezone field, not in the expression")
	}
	sched, err := parseSafely(expr)
	if err != nil {
		return nil, invalid("cron", "%q is not a cron expression (5 fields, an optional leading seconds field, or @hourly, @daily, @every 30s…): %v", expr, err)
	}
	spec := &Spec{sched: sched, loc: loc}
	switch s := sched.(type) {
	case *cron.SpecSchedule:
		s.Location = loc
		if s.Hour&allHours != allHours {
			spec.wall = true
			s.Location = time.UTC
		}
	case cron.ConstantDelaySchedule:
		// robfig/cron rounds shorter delays up to 1s; say so instead.
		if d, _ := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(expr, "@every"))); d < time.Second {
			return nil, invalid("cron", "%q: @every needs a duration of at least 1s", expr)
		}
	}
	return spec, nil
}

// parseSafely parses with robfig/cron, turning a panic on odd input into
// an error: bad input must never take a node down.
func parseSafely(expr string) (s cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("%v", r)
		}
	}()
	return cronParser.Parse(expr)
}

// Next is the first tick strictly after after, or the zero time if the
// spec never fires again (robfig/cron gives up after five years).
func (c *Spec) Next(after time.Time) time.Time {
	if !c.wall {
		return c.sched.Next(after.In(c.loc))
	}
	w := floating(after.In(c.loc))
	for range maxWallSteps {
		if w = c.sched.Next(w); w.IsZero() {
			return w
		}
		// A wall time in a fall-back's repeated hour maps to its first
		// occurrence, which may already be behind after: step on.
		if t := wallInstant(w, c.loc); t.After(after) {
			return t
		}
	}
	return time.Time{}
}

// floating is t's wall clock read as if it were UTC.
func floating(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// wallInstant is the instant at which loc's clocks show the wall time w
// (given as UTC): the first one if they show it twice, and the end of the
// gap if they jump over it.
func wallInstant(w time.Time, loc *time.Location) time.Time {
	u := w.Unix()
	var offsets []int
	for d := int64(-2); d <= 2; d++ {
		_, off := time.Unix(u+d*86400, 0).In(loc).Zone()
		if !containsInt(offsets, off) {
			offsets = append(offsets, off)
		}
	}
	var first time.Time
	for _, off := range offsets {
		t := time.Unix(u-int64(off), int64(w.Nanosecond())).In(loc)
		if floating(t).Equal(w) && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	if !first.IsZero() {
		return first
	}
	// A gap: just before it the clocks showed less than w, with the
	// larger of the offsets around it still ahead.
	before := time.Unix(u-int64(maxInt(offsets)), 0).In(loc)
	if _, end := before.ZoneBounds(); !end.IsZero() {
		return end.In(loc)
	}
	return before
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func maxInt(s []int) int {
	m := s[0]
	for _, x := range s[1:] {
		m = max(m, x)
	}
	return m
}

// catchupHorizon bounds how far back a leader looks for missed ticks: ticks
// older than this are dropped whatever the catch-up says.
const catchupHorizon = 7 * 24 * time.Hour

// Plan is what one scheduler pass does for one schedule.
type Plan struct {
	SkipTo time.Time   // zero, or the latest tick dropped by catch-up
	Missed int         // how many ticks were dropped
	Fire   []time.Time // ticks to run, oldest first
	Next   time.Time   // the first tick after now; zero if none
}

// NextRun is the tick a schedule runs next, as the leader's scheduler
// counts its ticks: the first one after now, stepping from lastTick (the
// latest tick accounted for), never from now. For `@every 5s` created at
// 12:00:00.3 that is 12:00:05 until then, whenever it is asked; counted
// from now it would be now+5s, a time that never fires. It is
// PlanTicks(...).Next, whatever the grace and catch-up. Zero if the spec
// never fires again.
func NextRun(spec *Spec, lastTick, now time.Time) time.Time {
	return PlanTicks(spec, lastTick, now, 0, 0).Next
}

// PlanTicks decides which of the ticks after lastTick and up to now run. A
// tick less than grace old is on time and runs. Older ones were missed
// (there was no leader, or it could not commit): the latest keep of them
// run (a schedule's catch-up policy says how many: none 0, one 1, all the
// leader's cap), the others are dropped.
func PlanTicks(spec *Spec, lastTick, now time.Time, grace time.Duration, keep int) Plan {
	var p Plan
	keep = max(keep, 0)
	from := lastTick
	if h := now.Add(-catchupHorizon); from.Before(h) {
		from = h
	}
	var late []time.Time
	t := spec.Next(from)
	for ; !t.IsZero() && !t.After(now); t = spec.Next(t) {
		if now.Sub(t) <= grace {
			p.Fire = append(p.Fire, t)
			continue
		}
		late = append(late, t)
		if len(late) > keep {
			p.SkipTo = late[0]
			p.Missed++
			late = late[1:]
		}
	}
	p.Fire = append(late, p.Fire...)
	p.Next = t
	return p
}
