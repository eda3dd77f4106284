package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

func TestCheckSchedule(t *testing.T) {
	created := time.Date(2026, 11, 21, 10, 0, 0, 400_000_000, time.UTC)
	tick := func(i int) time.Time { return created.Truncate(time.Second).Add(time.Duration(i) * time.Second) }
	job := func(id string, i int, status string) wire.Job {
		at := tick(i)
		return wire.Job{ID: id, Queue: cronQueue, Schedule: cronName, ScheduledFor: &at, Status: status}
	}
	// Ticks 1 to 5: 1, 2 and 5 ran, 3 and 4 were missed.
	good := func() (*wire.Schedule, []wire.Job) {
		last := tick(5)
		sc := &wire.Schedule{Name: cronName, CreatedAt: created, LastTick: &last, Runs: 3, Missed: 2}
		return sc, []wire.Job{job("a", 1, wire.StatusDone), job("b", 2, wire.StatusFailed), job("c", 5, wire.StatusDone)}
	}
	cases := []struct {
		name   string
		mutate func(sc *wire.Schedule, jobs []wire.Job) []wire.Job
		want   string // in the one anomaly; "" for none
	}{
		{"Consistent", func(sc *wire.Schedule, jobs []wire.Job) []wire.Job { return jobs }, ""},
		{"TickRanTwice", func(sc *wire.Schedule, jobs []wire.Job) []wire.Job {
			sc.Runs, sc.Missed = 4, 1
			return append(jobs, job("d", 2, wire.StatusDone))
		}, "ran twice"},
		{"TickUnaccounted", func(sc *wire.Schedule, jobs []wire.Job) []wire.Job {
			sc.Missed = 1
			return jobs
		}, "5 ticks"},
		{"JobLost", func(sc *wire.Schedule, jobs []wire.Job) []wire.Job { return jobs[1:] }, "counts 3 runs"},
		{"JobAfterTheLastTick", func(sc *wire.Schedule, jobs []wire.Job) []wire.Job {
			jobs[2] = job("c", 6, wire.StatusDone)
			return jobs
		}, "outside"},
		{"JobOffTheTicks", func(sc *wire.Schedule, jobs []wire.Job) []wire.Job {
			off := tick(2).Add(time.Millisecond)
			jobs[1].ScheduledFor = &off
			return jobs
		}, "not a tick"},
		{"JobUnfinished", func(sc *wire.Schedule, jobs []wire.Job) []wire.Job {
			jobs[0].Status = wire.StatusRunning
			return jobs
		}, "still running"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc, jobs := good()
			jobs = c.mutate(sc, jobs)
			res := &checkResult{}
			cr := checkSchedule(sc, jobs, res)
			switch {
			case c.want == "" && len(res.Anomalies) != 0:
				t.Fatalf("anomalies in a consistent run: %v", res.Anomalies)
			case c.want != "" && (len(res.Anomalies) != 1 || !strings.Contains(res.Anomalies[0], c.want)):
				t.Fatalf("anomalies %q, want one about %q", res.Anomalies, c.want)
			}
			if cr.Ticks != 5 {
				t.Errorf("counted %d ticks, want 5", cr.Ticks)
			}
		})
	}
}
