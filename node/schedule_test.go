package node_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/fsmtest"
	"github.com/workron/workron/internal/testkit/poll"
	"github.com/workron/workron/node"
)

// TestScheduleNextRun drives an `@every 5s` schedule as a user would, over
// HTTP against a node whose cluster clock is a test clock: the next_run it
// shows is the tick the leader's scheduler fires next, counted from the
// last tick, whenever it is read.
func TestScheduleNextRun(t *testing.T) {
	t0 := time.Date(2025, 1, 10, 12, 0, 0, 300e6, time.UTC) // 12:00:00.3
	clock := fsmtest.NewClock(t0)
	c := testConfig(t)
	c.Raft.Now = clock.Now                             // the cluster clock: entries, the API and the leader loops
	c.Leader.Scheduler.Interval = 5 * time.Millisecond // the scheduler rereads the test clock often
	n, err := node.Start(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Shutdown(); err != nil {
			t.Error(err)
		}
	})
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	do := func(method, path string, body, out any) int {
		t.Helper()
		var rd bytes.Buffer
		if body != nil {
			if err := json.NewEncoder(&rd).Encode(body); err != nil {
				t.Fatal(err)
			}
		}
		req, err := http.NewRequest(method, n.URL()+path, &rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if out != nil && resp.StatusCode < 300 {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
		}
		return resp.StatusCode
	}
	poll.Wait(t, 10*time.Second, 10*time.Millisecond, func() error {
		if code := do(http.MethodGet, "/health", nil, nil); code != http.StatusOK {
			return fmt.Errorf("GET /health: %d", code)
		}
		return nil
	})
	nextRun := func() time.Time {
		t.Helper()
		var sc wire.Schedule
		if code := do(http.MethodGet, "/schedules/tick", nil, &sc); code != http.StatusOK || sc.NextRun == nil {
			t.Fatalf("GET /schedules/tick: %d %+v", code, sc)
		}
		return *sc.NextRun
	}
	at := func(sec int) time.Time { return time.Date(2025, 1, 10, 12, 0, sec, 0, time.UTC) }

	var created wire.Schedule
	req := wire.ScheduleRequest{Name: "tick", Cron: "@every 5s", Job: wire.SubmitRequest{Command: "true"}}
	if code := do(http.MethodPost, "/schedules", req, &created); code != http.StatusCreated {
		t.Fatalf("POST /schedules: %d", code)
	}
	if created.NextRun == nil || !created.NextRun.Equal(at(5)) {
		t.Fatalf("created at 12:00:00.3: next_run %v, want 12:00:05", created.NextRun)
	}
	for _, d := range []time.Duration{time.Second, 4 * time.Second} {
		clock.Set(t0.Add(d))
		if got := nextRun(); !got.Equal(at(5)) {
			t.Fatalf("read at %s: next_run %s, want 12:00:05 (the first tick, not 5s after the read)", clock.Now().Format("15:04:05.0"), got.Format("15:04:05"))
		}
	}

	// The tick it showed is the one the scheduler fires.
	clock.Set(at(5).Add(500 * time.Millisecond))
	var sc wire.Schedule
	poll.Wait(t, 10*time.Second, 5*time.Millisecond, func() error {
		if code := do(http.MethodGet, "/schedules/tick", nil, &sc); code != http.StatusOK || sc.Runs != 1 {
			return fmt.Errorf("GET /schedules/tick: %d, %d runs", code, sc.Runs)
		}
		return nil
	})
	var j wire.Job
	if code := do(http.MethodGet, "/jobs/"+sc.LastJobID, nil, &j); code != http.StatusOK || j.ScheduledFor == nil || !j.ScheduledFor.Equal(at(5)) {
		t.Fatalf("the fired job %s: %d, scheduled_for %v, want 12:00:05", sc.LastJobID, code, j.ScheduledFor)
	}
	for _, now := range []time.Time{at(5).Add(500 * time.Millisecond), at(8).Add(900 * time.Millisecond)} {
		clock.Set(now)
		if got := nextRun(); !got.Equal(at(10)) {
			t.Fatalf("read at %s after the 12:00:05 tick: next_run %s, want 12:00:10", now.Format("15:04:05.0"), got.Format("15:04:05"))
		}
	}
}
