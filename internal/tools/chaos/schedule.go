package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/tools/jobcheck"
)

// The run's schedule fires every second through every fault. Its jobs go
// to their own queue, which the real workers serve first, so they do not
// mix with the recorded load. Crashed, paused or partitioned leaders and
// clock jumps may delay ticks, and catch-up may drop some (counted as
// missed), but no tick may run twice or go unaccounted for.
const (
	cronQueue = "chaos-cron"
	cronName  = "chaos-beat"
	cronEvery = time.Second
)

func cronRequest() wire.ScheduleRequest {
	attempts := 6 // worker kills eat attempts
	return wire.ScheduleRequest{Name: cronName, Cron: "@every " + cronEvery.String(), Catchup: "all", Overlap: "allow",
		Job: wire.SubmitRequest{Command: "true", Queue: cronQueue, MaxAttempts: &attempts}}
}

// postAny sends body to path through each running node in turn until one
// answers with a status ok accepts, or ctx ends.
func (c *cluster) postAny(ctx context.Context, path string, body any, ok func(int) bool) error {
	return c.sendAny(ctx, http.MethodPost, path, body, ok)
}

// sendAny is postAny with another method.
func (c *cluster) sendAny(ctx context.Context, method, path string, body any, ok func(int) bool) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	var last string
	for ctx.Err() == nil {
		for _, n := range c.nodes {
			if !n.Running() || n.Paused() {
				continue
			}
			req, err := http.NewRequestWithContext(ctx, method, n.URL+path, bytes.NewReader(data))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := c.pc.HTTP.Do(req)
			if err != nil {
				last = err.Error()
				continue
			}
			reply, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if ok(resp.StatusCode) {
				return nil
			}
			last = fmt.Sprintf("%s: HTTP %d %s", n.Name, resp.StatusCode, bytes.TrimSpace(reply))
		}
		sleep(ctx, 250*time.Millisecond)
	}
	return fmt.Errorf("%s %s: %s (%w)", method, path, last, ctx.Err())
}

// createSchedule creates the run's schedule; a 409 means an earlier try
// whose reply was lost made it.
func createSchedule(ctx context.Context, c *cluster) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return c.postAny(ctx, "/schedules", cronRequest(), func(s int) bool { return s == http.StatusCreated || s == http.StatusConflict })
}

// pauseSchedule stops the ticks before the drain.
func pauseSchedule(ctx context.Context, c *cluster) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return c.postAny(ctx, "/schedules/"+cronName+"/pause", struct{}{}, func(s int) bool { return s == http.StatusOK })
}

// readSchedule reads the run's schedule through any node.
func readSchedule(ctx context.Context, c *cluster) (*wire.Schedule, error) {
	var lastErr error
	for _, n := range c.nodes {
		var sc wire.Schedule
		status, _, err := c.pc.Get(ctx, n.URL+"/schedules/"+cronName, &sc)
		if err == nil && status == http.StatusOK {
			return &sc, nil
		}
		lastErr = fmt.Errorf("GET %s/schedules/%s: HTTP %d, %v", n.URL, cronName, status, err)
	}
	return nil, lastErr
}

// cronResult is what the schedule check counted.
type cronResult struct {
	Ticks  int // ticks from the schedule's first to its last
	Jobs   int
	Missed int
}

// checkSchedule: each tick from the first after the schedule's creation to
// its last tick is either run (exactly one job, named after it) or counted
// as missed or skipped; every job is for one of those ticks and finished.
func checkSchedule(sc *wire.Schedule, jobs []wire.Job, res *checkResult) cronResult {
	var cr cronResult
	if sc == nil {
		return cr
	}
	first := sc.CreatedAt.Truncate(cronEvery).Add(cronEvery)
	if sc.LastTick != nil && !sc.LastTick.Before(first) {
		span := sc.LastTick.Sub(first)
		if span%cronEvery != 0 {
			res.anomaly("schedule %s: last tick %s is not a tick (first %s)", cronName, sc.LastTick, first)
		}
		cr.Ticks = int(span/cronEvery) + 1
	}
	cr.Jobs, cr.Missed = len(jobs), int(sc.Missed)
	if got := int(sc.Runs + sc.Missed + sc.Skipped); got != cr.Ticks {
		res.anomaly("schedule %s: %d ticks from %s to %v, but %d runs + %d missed + %d skipped = %d",
			cronName, cr.Ticks, first, sc.LastTick, sc.Runs, sc.Missed, sc.Skipped, got)
	}
	if sc.LastError != "" {
		res.anomaly("schedule %s: a tick failed to make its job: %s", cronName, sc.LastError)
	}
	if uint64(len(jobs)) != sc.Runs {
		res.anomaly("schedule %s counts %d runs, but its queue has %d jobs", cronName, sc.Runs, len(jobs))
	}
	perTick := make(map[int64]string, len(jobs))
	for _, j := range jobs {
		if j.Schedule != cronName || j.ScheduledFor == nil {
			res.anomaly("job %s in queue %s is not from schedule %s", j.ID, cronQueue, cronName)
			continue
		}
		tick := *j.ScheduledFor
		switch {
		case tick.Before(first) || sc.LastTick == nil || tick.After(*sc.LastTick):
			res.anomaly("job %s is for tick %s, outside the schedule's ticks %s to %v", j.ID, tick, first, sc.LastTick)
		case tick.Sub(first)%cronEvery != 0:
			res.anomaly("job %s is for %s, which is not a tick", j.ID, tick)
		}
		if other, dup := perTick[tick.UnixNano()]; dup {
			res.anomaly("tick %s ran twice: jobs %s and %s", tick, other, j.ID)
		}
		perTick[tick.UnixNano()] = j.ID
		switch j.Status {
		case wire.StatusDone, wire.StatusFailed, wire.StatusScheduled:
		default:
			res.anomaly("scheduled job %s is still %s after quiescence: %s", j.ID, j.Status, jobcheck.History(j))
		}
	}
	return cr
}
