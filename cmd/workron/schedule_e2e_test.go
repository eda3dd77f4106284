//go:build unix

package main

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/poll"
	"github.com/workron/workron/internal/tools/jobcheck"
)

// TestEndToEndScheduleOncePerTickAcrossLeaderKills runs an @every 1s
// schedule (catch-up "all") on three server processes while the leader is
// SIGKILLed over and over, and checks that every tick from the schedule's
// first to its last has exactly one job, that the schedule's counters agree,
// and that every job ran and the nodes agree. The ticks due while there is no
// leader or no quorum are more than the grace late, so catch-up runs them. The in-process test in api
// stops leaders cleanly; this one kills them mid-write, including between a
// fire being proposed and its reply.
func TestEndToEndScheduleOncePerTickAcrossLeaderKills(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: SIGKILLs the leader of a 3-process cluster for about 25s")
	}
	const (
		runFor    = 24 * time.Second
		killEvery = 3 * time.Second
		grace     = 100 * time.Millisecond
	)
	bin := workronBinary(t)
	// A short grace, so that the ticks due while there is no leader are
	// missed and run by catch-up, not merely late.
	c := startCluster(t, bin, t.TempDir(), "--schedule-grace", grace.String())
	c.startWorker(t, "w1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	req := wire.ScheduleRequest{Name: "beat", Cron: "@every 1s", Catchup: "all", Overlap: "allow",
		Job: wire.SubmitRequest{Command: "true"}}
	var created wire.Schedule
	if status, raw := c.post(ctx, t, "/schedules", req, &created); status != http.StatusCreated {
		t.Fatalf("create schedule: %d %s", status, raw)
	}

	// Odd rounds kill the leader alone: the other two elect a new one at
	// once, which must not fire again what the dead one committed. Even
	// rounds kill a follower with it for longer than a tick: no quorum, so
	// the ticks of the outage are missed and catch-up must run each once.
	kills, quorumLost := 0, 0
	for end := time.Now().Add(runFor); time.Now().Before(end); {
		time.Sleep(killEvery) // let the leader fire a few ticks
		l := c.leader(t)
		down := []*node{l}
		pause := e2eKillPause
		if kills%2 == 1 {
			for _, n := range c.Nodes {
				if n != l {
					down = append(down, n)
					break
				}
			}
			pause = 1500 * time.Millisecond
			quorumLost++
		}
		for _, n := range down {
			n.Kill()
		}
		kills++
		time.Sleep(pause) // the outage, not a synchronisation
		for _, n := range down {
			c.restart(t, n)
		}
	}
	// Let the last leader catch up to now, then stop the ticks so that the
	// nodes can settle.
	until := time.Now()
	var sc wire.Schedule
	if poll.True(ctx, 0, 100*time.Millisecond, func() bool {
		status, _, err := c.Get(ctx, c.leader(t).URL+"/schedules/beat", &sc)
		return err == nil && status == http.StatusOK && sc.LastTick != nil && !sc.LastTick.Before(until)
	}) != nil {
		t.Fatalf("schedule did not catch up to %s: %+v", until, sc)
	}
	if status, raw := c.post(ctx, t, "/schedules/beat/pause", nil, &sc); status != http.StatusOK {
		t.Fatalf("pause schedule: %d %s", status, raw)
	}

	all, err := c.listAll(ctx, c.leader(t).URL, false)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	perTick := make(map[time.Time][]string)
	caughtUp := 0 // jobs created more than the grace after their tick
	for _, j := range all {
		if j.Schedule != "beat" || j.ScheduledFor == nil {
			t.Errorf("job %s is not from the schedule: %+v", j.ID, j)
			continue
		}
		ids = append(ids, j.ID)
		if j.CreatedAt.Sub(*j.ScheduledFor) > grace {
			caughtUp++
		}
		tick := j.ScheduledFor.UTC()
		perTick[tick] = append(perTick[tick], j.ID)
	}
	ticks := slices.SortedFunc(func(yield func(time.Time) bool) {
		for tick := range perTick {
			if !yield(tick) {
				return
			}
		}
	}, time.Time.Compare)
	for _, tick := range ticks {
		if n := len(perTick[tick]); n != 1 {
			t.Errorf("tick %s has %d jobs: %v", tick.Format(time.TimeOnly), n, perTick[tick])
		}
	}
	first := created.CreatedAt.Truncate(time.Second).Add(time.Second)
	if len(ticks) == 0 || !ticks[0].Equal(first) {
		t.Fatalf("first tick %v, want %s (the second after creation)", ticks[:min(1, len(ticks))], first)
	}
	for i := 1; i < len(ticks); i++ {
		if gap := ticks[i].Sub(ticks[i-1]); gap != time.Second {
			t.Errorf("ticks %s and %s are %s apart", ticks[i-1].Format(time.TimeOnly), ticks[i].Format(time.TimeOnly), gap)
		}
	}
	last := ticks[len(ticks)-1]
	if sc.LastTick == nil || !sc.LastTick.Equal(last) || sc.Runs != uint64(len(all)) || sc.Missed != 0 || sc.Skipped != 0 {
		t.Errorf("schedule says last tick %v, %d runs, %d missed, %d skipped; the jobs say %s and %d", sc.LastTick, sc.Runs, sc.Missed, sc.Skipped, last, len(all))
	}
	if caughtUp == 0 {
		t.Errorf("no tick was run by catch-up after %d outages without a quorum", quorumLost)
	}
	if t.Failed() {
		t.FailNow()
	}

	jobs := c.waitAllDone(t, ids)
	for _, j := range jobs {
		for _, p := range jobcheck.FinishedOnce(j) {
			t.Error(p)
		}
	}
	c.checkNodesAgree(t, ids, jobs)
	c.checkAlive(t)
	t.Logf("%d leader kills (%d with a follower); %d ticks from %s to %s, one job each (%d run by catch-up), all done",
		kills, quorumLost, len(ticks), ticks[0].Format(time.TimeOnly), last.Format(time.TimeOnly), caughtUp)
}
