package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/store"
)

// TestScheduleOncePerTickAcrossLeaderChanges runs an @every 1s schedule on
// three nodes while the leader is stopped over and over, and checks that
// every tick from the schedule's creation to the end has exactly one job:
// no duplicates, and (with catch-up "all") no gaps.
func TestScheduleOncePerTickAcrossLeaderChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("stops the leader of a 3-node cluster for about 30s")
	}
	const (
		runFor    = 30 * time.Second
		killEvery = 4 * time.Second
	)
	c := clustertest.New(t, 3)
	client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	t.Cleanup(client.CloseIdleConnections)

	l := c.Leader(t)
	req := wire.ScheduleRequest{Name: "beat", Cron: "@every 1s", Catchup: "all", Job: wire.SubmitRequest{Command: "true"}}
	body, _ := json.Marshal(req)
	resp, err := client.Post(c.URL(l)+"/schedules", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create schedule: HTTP %d %s", resp.StatusCode, data)
	}
	var created wire.Schedule
	if err := json.Unmarshal(data, &created); err != nil {
		t.Fatal(err)
	}

	end := time.Now().Add(runFor)
	kills := 0
	for time.Now().Before(end) {
		time.Sleep(killEvery) // let the leader run a few ticks
		l = c.Leader(t)
		c.Kill(t, l)
		kills++
		c.Leader(t) // a new one, from the two left
		c.Restart(t, l)
	}
	// Let the last leader catch up to now, then compare the nodes.
	until := time.Now()
	clustertest.WaitFor(t, 10*time.Second, func() error {
		sc, err := c.Node(c.Leader(t)).Raft().FSM().Schedule("beat")
		if err != nil {
			return err
		}
		if time.Unix(0, sc.LastTick).Before(until) {
			return fmt.Errorf("last tick %s, want one after %s", time.Unix(0, sc.LastTick), until)
		}
		return nil
	})
	c.Converged(t, 10*time.Second)
	f := c.Node(c.Leader(t)).Raft().FSM()
	jobs, _, err := f.ListJobs(store.ListQuery{Match: func(j *store.Job) bool { return j.Schedule == "beat" }})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := f.Schedule("beat")
	if err != nil {
		t.Fatal(err)
	}

	perTick := make(map[int64]int)
	var (
		ticks    []int64
		lateness time.Duration // the most a job was created after its tick
	)
	for _, j := range jobs {
		lateness = max(lateness, time.Duration(j.CreatedAt-j.ScheduledFor))
		if perTick[j.ScheduledFor]++; perTick[j.ScheduledFor] == 1 {
			ticks = append(ticks, j.ScheduledFor)
		}
		if j.ScheduledFor%int64(time.Second) != 0 {
			t.Errorf("job %s is for %d, not a whole second", j.ID, j.ScheduledFor)
		}
	}
	slices.Sort(ticks)
	for tick, n := range perTick {
		if n != 1 {
			t.Errorf("tick %s has %d jobs", time.Unix(0, tick).UTC(), n)
		}
	}
	first := created.CreatedAt.Truncate(time.Second).Add(time.Second)
	if len(ticks) == 0 || ticks[0] != first.UnixNano() {
		t.Fatalf("first tick %v, want %s (the second after creation)", ticks[:min(1, len(ticks))], first)
	}
	for i := 1; i < len(ticks); i++ {
		if gap := time.Duration(ticks[i] - ticks[i-1]); gap != time.Second {
			t.Errorf("ticks %s and %s are %s apart", time.Unix(0, ticks[i-1]).UTC(), time.Unix(0, ticks[i]).UTC(), gap)
		}
	}
	if last := ticks[len(ticks)-1]; last != sc.LastTick || sc.Runs != uint64(len(jobs)) || sc.Missed != 0 || sc.Skipped != 0 {
		t.Errorf("schedule %+v after %d jobs up to %s", sc, len(jobs), time.Unix(0, last).UTC())
	}
	t.Logf("%d leader changes, %d ticks from %s to %s, one job each, created at most %s after its tick", kills, len(ticks),
		time.Unix(0, ticks[0]).UTC().Format(time.TimeOnly), time.Unix(0, ticks[len(ticks)-1]).UTC().Format(time.TimeOnly), lateness)
}
