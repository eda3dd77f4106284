package clustertest_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker"
)

func TestCancelAndRetry(t *testing.T) {
	c := newCluster(t, 3)
	url := c.URL(c.Followers(t)[0])

	t.Run("APendingJobIsCancelledAtOnceAndRetriedWithAFreshBudget", func(t *testing.T) {
		j := submit(t, url, wire.SubmitRequest{Command: "true", Queue: "cr-pending", Delay: "1h"})
		if j.Status != wire.StatusScheduled {
			t.Fatalf("a job delayed 1h is %s, want scheduled", j.Status)
		}
		got := decode[wire.Job](t, call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+j.ID+"/cancel", nil))
		if got.Status != wire.StatusCancelled || got.DoneAt == nil {
			t.Fatalf("after cancel: %s done_at %v", got.Status, got.DoneAt)
		}
		wantError(t, send(t, http.MethodPost, url+"/jobs/"+j.ID+"/cancel", nil), http.StatusConflict, "conflict", "cancelled")
		got = decode[wire.Job](t, call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+j.ID+"/retry", nil))
		if got.Status != wire.StatusPending || got.Attempts != 0 || got.DoneAt != nil {
			t.Fatalf("after retry: %s attempts %d done_at %v, want pending now with 0 attempts", got.Status, got.Attempts, got.DoneAt)
		}
		claimed := claimOne(t, url, "cr-worker", "", "cr-pending")
		if claimed.ID != j.ID || claimed.Attempts != 1 {
			t.Fatalf("claim after retry = %s attempt %d", claimed.ID, claimed.Attempts)
		}
		call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+j.ID+"/done", wire.ReportRequest{Lease: claimed.Lease})
		wantError(t, send(t, http.MethodPost, url+"/jobs/"+j.ID+"/retry", nil), http.StatusConflict, "conflict", "done")
	})

	t.Run("ARunningJobIsCancellingUntilItsWorkerStops", func(t *testing.T) {
		j := submit(t, url, wire.SubmitRequest{Command: "sleep 60", Queue: "cr-running"})
		claimed := claimOne(t, url, "cr-worker", "", "cr-running")
		got := decode[wire.Job](t, call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+j.ID+"/cancel", nil))
		if got.Status != wire.StatusCancelling {
			t.Fatalf("cancelling a running job gave %s, want cancelling", got.Status)
		}
		hb := decode[wire.HeartbeatResponse](t, call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+j.ID+"/heartbeat", wire.HeartbeatRequest{Lease: claimed.Lease}))
		if hb.Action != wire.ActionCancel {
			t.Errorf("heartbeat of a cancelling job: action %q, want cancel", hb.Action)
		}
		whb := decode[wire.WorkerHeartbeatResponse](t, call(t, http.StatusOK, http.MethodPost, url+"/workers/cr-worker/heartbeat", nil))
		if len(whb.Actions) != 1 || whb.Actions[0].JobID != j.ID || whb.Actions[0].Action != wire.ActionCancel {
			t.Errorf("worker heartbeat actions = %+v, want cancel %s", whb.Actions, j.ID)
		}
		got = decode[wire.Job](t, call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+j.ID+"/fail", wire.ReportRequest{Lease: claimed.Lease, Error: "cancelled"}))
		if got.Status != wire.StatusCancelled {
			t.Fatalf("after the worker stopped: %s, want cancelled", got.Status)
		}
	})

	t.Run("ARunningJobIsStoppedByARealWorker", func(t *testing.T) {
		startWorker(t, c, "cr-real", func(cfg *worker.Config) { cfg.Queues = []string{"cr-real"} }, nil)
		j := submit(t, url, wire.SubmitRequest{Command: "sleep 60", Queue: "cr-real"})
		waitJob(t, url, j.ID, 10*time.Second, statusIs(wire.StatusRunning))
		call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+j.ID+"/cancel", nil)
		// The worker learns it from its heartbeat (every third of the 2s
		// lease) and reports the attempt ended.
		got := waitJob(t, url, j.ID, 10*time.Second, statusIs(wire.StatusCancelled, wire.StatusFailed, wire.StatusDone))
		if got.Status != wire.StatusCancelled {
			t.Fatalf("cancelled running job ended %s (%s)", got.Status, got.LastError)
		}
	})

	t.Run("CancellingAParentCancelsItsBlockedDependents", func(t *testing.T) {
		batch := wire.BatchSubmitRequest{Jobs: []wire.SubmitRequest{
			{Command: "true", Queue: "cr-cascade", Delay: "1h"},
			{Command: "true", Queue: "cr-cascade", DependsOn: []string{"$0"}},
		}}
		jobs := decode[wire.JobList](t, call(t, http.StatusCreated, http.MethodPost, url+"/jobs/batch", batch)).Jobs
		call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+jobs[0].ID+"/cancel", nil)
		child := getJob(t, url, jobs[1].ID)
		if child.Status != wire.StatusCancelled || !strings.Contains(child.LastError, jobs[0].ID) {
			t.Errorf("dependent after its parent was cancelled: %s %q", child.Status, child.LastError)
		}
		// Retrying the parent brings the dependent back, waiting for it.
		call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+jobs[0].ID+"/retry", nil)
		if child := getJob(t, url, jobs[1].ID); child.Status != wire.StatusBlocked || child.LastError != "" {
			t.Errorf("dependent after its parent was retried: %s %q, want blocked", child.Status, child.LastError)
		}
		// ?cascade=false retries the parent alone.
		call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+jobs[0].ID+"/cancel", nil)
		call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+jobs[0].ID+"/retry?cascade=false", nil)
		if child := getJob(t, url, jobs[1].ID); child.Status != wire.StatusCancelled {
			t.Errorf("dependent after retry?cascade=false of its parent: %s, want cancelled", child.Status)
		}
	})

	t.Run("AFailedJobIsRetried", func(t *testing.T) {
		j := submit(t, url, wire.SubmitRequest{Command: "exit 1", Queue: "cr-failed", MaxAttempts: ptr(1)})
		claimed := claimOne(t, url, "cr-worker", "", "cr-failed")
		one := 1
		got := decode[wire.Job](t, call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+j.ID+"/fail", wire.ReportRequest{Lease: claimed.Lease, ExitCode: &one}))
		if got.Status != wire.StatusFailed {
			t.Fatalf("after its only attempt failed: %s", got.Status)
		}
		got = decode[wire.Job](t, call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+j.ID+"/retry", nil))
		if got.Status != wire.StatusPending || got.Attempts != 0 {
			t.Fatalf("after retry: %s attempts %d", got.Status, got.Attempts)
		}
		again := claimOne(t, url, "cr-worker", "", "cr-failed")
		if again.ID != j.ID || again.Lease <= claimed.Lease || again.Attempts != 1 {
			t.Fatalf("claim after retry: %s lease %d attempt %d", again.ID, again.Lease, again.Attempts)
		}
		call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+j.ID+"/done", wire.ReportRequest{Lease: again.Lease})
		final := getJob(t, url, j.ID)
		if final.Status != wire.StatusDone || len(final.AttemptHistory) != 2 {
			t.Errorf("final: %s with %d attempts in history, want done after 2", final.Status, len(final.AttemptHistory))
		}
	})
	c.Converged(t, 5*time.Second)
}

// queueList is the reply of GET /queues.
type queueList struct {
	Queues []struct {
		Name   string         `json:"name"`
		Paused bool           `json:"paused"`
		Counts map[string]int `json:"counts"`
	} `json:"queues"`
}

func TestPausedQueue(t *testing.T) {
	c := newCluster(t, 3)
	f := c.Followers(t)
	url := c.URL(f[0])
	j := submit(t, url, wire.SubmitRequest{Command: "true", Queue: "pq"})
	other := submit(t, url, wire.SubmitRequest{Command: "true", Queue: "pq-other"})
	call(t, http.StatusOK, http.MethodPost, url+"/queues/pq/pause", nil)

	t.Run("EveryNodeShowsTheQueuePaused", func(t *testing.T) {
		for i := range c.Len() {
			queues := decode[queueList](t, call(t, http.StatusOK, http.MethodGet, c.URL(i)+"/queues", nil))
			paused := false
			for _, q := range queues.Queues {
				paused = paused || (q.Name == "pq" && q.Paused && q.Counts[wire.StatusPending] == 1)
			}
			if !paused {
				t.Errorf("n%d GET /queues does not show pq paused with its job: %+v", i+1, queues)
			}
		}
	})

	t.Run("AClaimOnAPausedQueueGetsNothing", func(t *testing.T) {
		r := call(t, http.StatusOK, http.MethodPost, url+"/jobs/claim", wire.ClaimRequest{WorkerID: "pq-worker", Queues: []string{"pq"}, Wait: "200ms"})
		if got := decode[wire.ClaimResponse](t, r); len(got.Jobs) != 0 {
			t.Fatalf("claimed from a paused queue: %s", r)
		}
		call(t, http.StatusNoContent, http.MethodGet, url+"/jobs/next?worker_id=pq-seed&queue=pq", nil)
		if got := getJob(t, url, j.ID); got.Status != wire.StatusPending {
			t.Fatalf("job in a paused queue is %s", got.Status)
		}
	})

	t.Run("OtherQueuesAreStillServed", func(t *testing.T) {
		got := claimOne(t, url, "pq-worker", "", "pq", "pq-other")
		if got.ID != other.ID {
			t.Fatalf("claim over pq and pq-other got %s, want %s of pq-other", got.ID, other.ID)
		}
	})

	t.Run("AWaitingClaimGetsTheJobOnceResumed", func(t *testing.T) {
		type result struct {
			r   reply
			err error
		}
		got := make(chan result, 1)
		go func() {
			r, err := try(http.MethodPost, c.URL(f[1])+"/jobs/claim", wire.ClaimRequest{WorkerID: "pq-worker", Queues: []string{"pq"}, Wait: "10s"})
			got <- result{r, err}
		}()
		// The claim may start before or after the resume; either way it
		// must come back with the job, long before its 10s wait.
		call(t, http.StatusOK, http.MethodPost, url+"/queues/pq/resume", nil)
		var r reply
		select {
		case res := <-got:
			if res.err != nil {
				t.Fatal(res.err)
			}
			r = res.r
		case <-time.After(8 * time.Second):
			t.Fatal("the waiting claim was not woken by the resume")
		}
		resp := decode[wire.ClaimResponse](t, r)
		if len(resp.Jobs) != 1 || resp.Jobs[0].ID != j.ID {
			t.Fatalf("claim after resume: %s", r)
		}
	})
	c.Converged(t, 5*time.Second)
}
