package clustertest_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker"
)

// TestJobRulesSurviveALeaderChange: a delayed job fires once, a backoff
// already decided is not reset, and a cancel is not lost when the leader
// that accepted them goes away.
func TestJobRulesSurviveALeaderChange(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster through a leader change")
	}
	c := newCluster(t, 3)
	startWorker(t, c, "w1", nil, map[string]worker.HandlerFunc{
		"ok": func(context.Context, *worker.Job) error { return nil },
		"flaky": func(_ context.Context, j *worker.Job) error {
			if j.Attempt == 1 {
				return errors.New("first attempt fails")
			}
			return nil
		},
	})
	leader := c.Leader(t)
	via := c.URL(c.Followers(t)[0])

	delayed := submit(t, via, wire.SubmitRequest{Type: "ok", Delay: "2s"})
	flaky := submit(t, via, wire.SubmitRequest{Type: "flaky", MaxAttempts: intp(3),
		Backoff: &wire.Backoff{Base: "3s", Max: "3s"}})
	parked := submit(t, via, wire.SubmitRequest{Type: "ok", Queue: "parked"})
	// The flaky job's first attempt fails and its retry is set 3s out.
	waitingRetry := waitJob(t, via, flaky.ID, 10*time.Second, func(j wire.Job) bool {
		return j.Attempts == 1 && j.Status == wire.StatusScheduled
	})
	call(t, http.StatusOK, "POST", via+"/jobs/"+parked.ID+"/cancel", nil)

	c.Kill(t, leader)
	next := c.Leader(t)
	url := c.URL(next)

	t.Run("ACancelIsNotLost", func(t *testing.T) {
		if j := getJob(t, url, parked.ID); j.Status != wire.StatusCancelled {
			t.Fatalf("cancelled job is %s after the leader change", j.Status)
		}
	})
	t.Run("ABackoffIsNotReset", func(t *testing.T) {
		if j := getJob(t, url, flaky.ID); !j.RunAt.Equal(waitingRetry.RunAt) {
			t.Fatalf("retry time moved from %s to %s", waitingRetry.RunAt, j.RunAt)
		}
		j := waitJob(t, url, flaky.ID, 15*time.Second, statusIs(wire.StatusDone))
		if j.Attempts != 2 || len(j.AttemptHistory) != 2 {
			t.Fatalf("attempts %d, history %+v, want 2", j.Attempts, j.AttemptHistory)
		}
		if got := j.AttemptHistory[1].Started; got.Before(waitingRetry.RunAt) {
			t.Fatalf("retry started at %s, before its backoff ended at %s", got, waitingRetry.RunAt)
		}
	})
	t.Run("ADelayedJobFiresOnce", func(t *testing.T) {
		j := waitJob(t, url, delayed.ID, 15*time.Second, statusIs(wire.StatusDone))
		if j.Attempts != 1 || len(j.AttemptHistory) != 1 {
			t.Fatalf("delayed job ran %d times: %+v", j.Attempts, j.AttemptHistory)
		}
		if j.StartedAt == nil || j.StartedAt.Before(j.RunAt) {
			t.Fatalf("delayed job started at %v, before its run_at %s", j.StartedAt, j.RunAt)
		}
	})

	c.Restart(t, leader)
	c.Converged(t, 15*time.Second)
}

func intp(n int) *int { return &n }
