package cronspec

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestCronSpecDST checks the ticks around daylight-saving transitions. In
// 2025 Europe/Paris springs forward on 30 March (02:00 CET → 03:00 CEST)
// and falls back on 26 October (03:00 CEST → 02:00 CET); America/New_York
// springs forward on 9 March and falls back on 2 November.
func TestCronSpecDST(t *testing.T) {
	for _, c := range []struct {
		name, expr, tz, from string
		want                 []string
	}{
		{"FixedTimeInTheSkippedHourRunsWhenClocksJump", "30 2 * * *", "Europe/Paris", "2025-03-29T00:00:00+01:00",
			[]string{"2025-03-29T02:30:00+01:00", "2025-03-30T03:00:00+02:00", "2025-03-31T02:30:00+02:00"}},
		{"FixedTimeInTheRepeatedHourRunsOnce", "30 2 * * *", "Europe/Paris", "2025-10-25T00:00:00+02:00",
			[]string{"2025-10-25T02:30:00+02:00", "2025-10-26T02:30:00+02:00", "2025-10-27T02:30:00+01:00"}},
		{"SeveralTimesInTheSkippedHourRunOnce", "0,30 2 * * *", "Europe/Paris", "2025-03-29T23:00:00+01:00",
			[]string{"2025-03-30T03:00:00+02:00", "2025-03-31T02:00:00+02:00", "2025-03-31T02:30:00+02:00"}},
		{"FixedTimeJustAfterTheRepeatedHourRunsOnce", "0 3 * * *", "Europe/Paris", "2025-10-25T12:00:00+02:00",
			[]string{"2025-10-26T03:00:00+01:00", "2025-10-27T03:00:00+01:00"}},
		{"SecondsFieldInTheSkippedHour", "0 30 2 * * *", "America/New_York", "2025-03-08T12:00:00-05:00",
			[]string{"2025-03-09T03:00:00-04:00", "2025-03-10T02:30:00-04:00"}},
		{"DailyAcrossFallBack", "@daily", "America/New_York", "2025-11-01T12:00:00-04:00",
			[]string{"2025-11-02T00:00:00-04:00", "2025-11-03T00:00:00-05:00"}},
		{"EveryHourSpecFollowsRealTimeAtSpringForward", "*/30 * * * *", "Europe/Paris", "2025-03-30T00:45:00+01:00",
			[]string{"2025-03-30T01:00:00+01:00", "2025-03-30T01:30:00+01:00", "2025-03-30T03:00:00+02:00", "2025-03-30T03:30:00+02:00"}},
		{"EveryHourSpecFollowsRealTimeAtFallBack", "*/30 * * * *", "Europe/Paris", "2025-10-26T01:45:00+02:00",
			[]string{"2025-10-26T02:00:00+02:00", "2025-10-26T02:30:00+02:00", "2025-10-26T02:00:00+01:00", "2025-10-26T02:30:00+01:00", "2025-10-26T03:00:00+01:00"}},
		{"EveryIsRealTime", "@every 1h", "Europe/Paris", "2025-10-26T00:00:00+02:00",
			[]string{"2025-10-26T01:00:00+02:00", "2025-10-26T02:00:00+02:00", "2025-10-26T02:00:00+01:00", "2025-10-26T03:00:00+01:00"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec, err := Parse(c.expr, c.tz)
			if err != nil {
				t.Fatal(err)
			}
			at := mustTime(t, c.from)
			for i, w := range c.want {
				at = spec.Next(at)
				if want := mustTime(t, w); !at.Equal(want) {
					t.Fatalf("tick %d of %q in %s after %s: %s, want %s", i, c.expr, c.tz, c.from, at.Format(time.RFC3339), w)
				}
			}
		})
	}
}

func TestParseCron(t *testing.T) {
	for _, c := range []struct{ expr, tz, field, says string }{
		{"*/5 * * * *", "Europe/Paris", "", ""},
		{"0 */10 * * * *", "", "", ""},
		{"@every 30s", "", "", ""},
		{"@daily", "America/New_York", "", ""},
		{"", "", "cron", "must not be empty"},
		{"61 * * * *", "", "cron", "not a cron expression"},
		{"* * *", "", "cron", "not a cron expression"},
		{"@fortnightly", "", "cron", "not a cron expression"},
		{"@every 500ms", "", "cron", "at least 1s"},
		{"TZ=Europe/Paris 0 3 * * *", "", "cron", "timezone field"},
		{"CRON_TZ=Europe/Paris", "", "cron", "timezone field"},
		{"0 3 * * *", "Mars/Olympus_Mons", "timezone", "not a known time zone"},
		{"0 3 * * *", "Local", "timezone", "differs from node to node"},
	} {
		_, err := Parse(c.expr, c.tz)
		var be *Error
		switch {
		case c.field == "" && err != nil:
			t.Errorf("Parse(%q, %q): %v", c.expr, c.tz, err)
		case c.field == "":
		case !errors.As(err, &be) || be.Field != c.field || !strings.Contains(be.Reason, c.says):
			t.Errorf("Parse(%q, %q): %v, want an error on %s saying %q", c.expr, c.tz, err, c.field, c.says)
		}
	}
}

func TestPlanTicks(t *testing.T) {
	spec, err := Parse("@every 1m", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	last := mustTime(t, "2025-01-10T00:00:00Z")
	now := last.Add(10*time.Minute + 5*time.Second) // tick 10 is 5s late, 1-9 were missed
	minute := func(n int) time.Time { return last.Add(time.Duration(n) * time.Minute) }
	for _, c := range []struct {
		catchup string
		keep    int
		fire    []int
		missed  int
		skipTo  int
	}{
		{"none", 0, []int{10}, 9, 9},
		{"one", 1, []int{9, 10}, 8, 8},
		{"all", 100, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0, 0},
		{"all, at most 4", 4, []int{6, 7, 8, 9, 10}, 5, 5},
	} {
		p := PlanTicks(spec, last, now, 10*time.Second, c.keep)
		var fire []int
		for _, f := range p.Fire {
			fire = append(fire, int(f.Sub(last)/time.Minute))
		}
		skipTo := 0
		if !p.SkipTo.IsZero() {
			skipTo = int(p.SkipTo.Sub(last) / time.Minute)
		}
		if !equalInts(fire, c.fire) || p.Missed != c.missed || skipTo != c.skipTo || !p.Next.Equal(minute(11)) {
			t.Errorf("catchup %s (keep %d): fire %v, missed %d up to %d, next %s; want fire %v, missed %d up to %d, next %s",
				c.catchup, c.keep, fire, p.Missed, skipTo, p.Next, c.fire, c.missed, c.skipTo, minute(11))
		}
	}
	// A leader that was away for longer than the horizon does not walk the
	// whole gap.
	p := PlanTicks(spec, last.Add(-365*24*time.Hour), now, 10*time.Second, 0)
	if len(p.Fire) != 1 || p.Missed > int(catchupHorizon/time.Minute)+10 {
		t.Errorf("year-old LastTick: fire %d, missed %d", len(p.Fire), p.Missed)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzCron feeds the cron parser (robfig/cron, which panics on some input)
// and the tick planner: an expression is refused with a 400-style error or
// gives ticks in order, after the time asked, in bounded time.
func FuzzCron(f *testing.F) {
	for _, s := range []struct{ expr, tz string }{
		{"*/5 * * * *", "UTC"}, {"0 30 2 * * *", "Europe/Paris"}, {"30 2 * * *", "America/New_York"},
		{"@hourly", ""}, {"@daily", "Australia/Lord_Howe"}, {"@every 30s", ""}, {"@every 0s", ""},
		{"@every -1s", ""}, {"0 0 30 2 *", ""}, {"TZ=UTC * * * * *", ""}, {"* * * * * * *", ""},
		{"1-0 * * * *", ""}, {"*/0 * * * *", ""}, {"60 * * * *", ""}, {"@every 2562047h", ""},
		{"0,30 2 * * *", "Europe/Paris"}, {"* * * * *", "Local"}, {"* * * * *", "../../etc/passwd"},
		{"0 0 1 1 *", "Pacific/Apia"}, {"5-4/2 * * * *", ""}, {"?", ""}, {"", ""},
	} {
		f.Add(s.expr, s.tz)
	}
	f.Fuzz(func(t *testing.T, expr, tz string) {
		spec, err := Parse(expr, tz)
		if err != nil {
			var be *Error
			if !errors.As(err, &be) || be.Field == "" {
				t.Fatalf("Parse(%q, %q) error %v names no field", expr, tz, err)
			}
			return
		}
		from := fuzzEpoch
		for range 5 {
			next := spec.Next(from)
			if next.IsZero() {
				break
			}
			if !next.After(from) {
				t.Fatalf("Parse(%q, %q): next after %s is %s", expr, tz, from, next)
			}
			from = next
		}
		p := PlanTicks(spec, fuzzEpoch, fuzzEpoch.Add(10*time.Minute), 10*time.Second, 100)
		for i := 1; i < len(p.Fire); i++ {
			if !p.Fire[i].After(p.Fire[i-1]) {
				t.Fatalf("ticks out of order: %v", p.Fire)
			}
		}
		if len(p.Fire) > 100+61*10 { // at most one a second beyond the catch-up cap
			t.Fatalf("%d ticks to fire in 10 minutes", len(p.Fire))
		}
	})
}

// fuzzEpoch is the fixed "now" of FuzzCron.
var fuzzEpoch = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// mustTime parses an RFC 3339 time or fails the test.
func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestNextRun checks that a schedule's next run steps from its last tick,
// not from the time it is asked.
func TestNextRun(t *testing.T) {
	at := func(h, m, s, ms int) time.Time { return time.Date(2025, 1, 10, h, m, s, ms*1e6, time.UTC) }
	every, err := Parse("@every 5s", "")
	if err != nil {
		t.Fatal(err)
	}
	hourly, err := Parse("0 * * * *", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name           string
		spec           *Spec
		last, now, run time.Time
	}{
		{"EveryIsTheFirstTickAfterTheLast", every, at(12, 0, 0, 300), at(12, 0, 4, 0), at(12, 0, 5, 0)},
		{"EveryAskedJustAfterTheLastTick", every, at(12, 0, 5, 0), at(12, 0, 5, 1), at(12, 0, 10, 0)},
		{"EveryAfterTicksNotYetFiredIsTheFirstAfterNow", every, at(12, 0, 0, 0), at(12, 0, 12, 0), at(12, 0, 15, 0)},
		{"EveryBeforeTheLastTick", every, at(12, 0, 10, 0), at(12, 0, 7, 0), at(12, 0, 15, 0)},
		{"CronIsTheSameWhicheverWay", hourly, at(11, 0, 0, 0), at(12, 30, 0, 0), at(13, 0, 0, 0)},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := NextRun(c.spec, c.last, c.now); !got.Equal(c.run) {
				t.Fatalf("NextRun(last %s, now %s) = %s, want %s", c.last.Format(time.StampMilli), c.now.Format(time.StampMilli), got.Format(time.StampMilli), c.run.Format(time.StampMilli))
			}
			if p := PlanTicks(c.spec, c.last, c.now, time.Minute, 3); !p.Next.Equal(c.run) {
				t.Fatalf("the scheduler's plan says the next tick is %s, NextRun %s", p.Next, c.run)
			}
		})
	}
}
