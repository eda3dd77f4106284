package api

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

// TestWaitingSaysWhy: every job that is not running says why, in GET
// /jobs/{id} and GET /jobs, for each reason in its order.
func TestWaitingSaysWhy(t *testing.T) {
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	e := newSchedEnv(t, start, nil)
	submit := func(body string) wire.Job {
		t.Helper()
		var j wire.Job
		if code, werr := e.do(http.MethodPost, "/jobs", body, &j); code != http.StatusCreated {
			t.Fatalf("submit %s: %d %+v", body, code, werr)
		}
		return j
	}
	get := func(id string) wire.Job {
		t.Helper()
		var j wire.Job
		if code, werr := e.do(http.MethodGet, "/jobs/"+id, nil, &j); code != http.StatusOK {
			t.Fatalf("get %s: %d %+v", id, code, werr)
		}
		return j
	}
	want := func(j wire.Job, code, reason string) {
		t.Helper()
		got := get(j.ID)
		if got.WaitingCode != code || got.Waiting != reason {
			t.Errorf("job %s: waiting = %q %q, want %q %q", j.ID, got.WaitingCode, got.Waiting, code, reason)
		}
	}

	plain := submit(`{"command":"true","queue":"emails"}`)
	want(plain, wire.WaitNoWorker, "no worker is active")

	if code, werr := e.do(http.MethodPost, "/workers/register", `{"id":"w1","queues":["default"],"resources":{"memory_mb":1024}}`, nil); code != http.StatusCreated {
		t.Fatalf("register: %d %+v", code, werr)
	}
	t.Run("NoWorkerServesTheQueue", func(t *testing.T) {
		want(plain, wire.WaitNoWorker, "no active worker serves queue emails")
	})
	t.Run("Resources", func(t *testing.T) {
		j := submit(`{"command":"true","resources":{"cpu_millis":500}}`)
		want(j, wire.WaitResources, "needs 500 CPU millicores; largest worker has 0 (of those serving queue default)")
		if got := get(j.ID); got.Unschedulable == "" {
			t.Error("unschedulable is no longer shown")
		}
	})
	t.Run("Ready", func(t *testing.T) {
		want(submit(`{"command":"true"}`), wire.WaitWorker, "ready; waits for a worker of queue default to take it (active workers serving it: 1)")
	})
	t.Run("Delay", func(t *testing.T) {
		at := start.Add(time.Hour).Format(time.RFC3339)
		want(submit(`{"command":"true","run_at":"`+at+`"}`), wire.WaitDelay, "scheduled for "+at)
	})
	t.Run("Dependency", func(t *testing.T) {
		parent := submit(`{"command":"true","queue":"later"}`)
		child := submit(`{"command":"true","depends_on":["` + parent.ID + `"]}`)
		want(child, wire.WaitDependency, "waits for 1 of its 1 dependencies to succeed: "+parent.ID)
	})
	t.Run("PausedQueue", func(t *testing.T) {
		j := submit(`{"command":"true","queue":"held"}`)
		if code, werr := e.do(http.MethodPost, "/queues/held/pause", nil, nil); code != http.StatusOK {
			t.Fatalf("pause: %d %+v", code, werr)
		}
		want(j, wire.WaitPaused, "queue held is paused")
	})
	t.Run("InTheList", func(t *testing.T) {
		var list wire.JobList
		if code, werr := e.do(http.MethodGet, "/jobs", nil, &list); code != http.StatusOK {
			t.Fatalf("list: %d %+v", code, werr)
		}
		for _, j := range list.Jobs {
			if j.Waiting == "" || j.WaitingCode == "" {
				t.Errorf("job %s (%s) in the list says nothing of its wait", j.ID, j.Status)
			}
			if j.ID == plain.ID && j.WaitingCode != wire.WaitNoWorker {
				t.Errorf("job %s in the list: %q", j.ID, j.WaitingCode)
			}
		}
	})
	t.Run("RunningJobsDoNotWait", func(t *testing.T) {
		var cr wire.ClaimResponse
		if code, werr := e.do(http.MethodPost, "/jobs/claim", `{"worker_id":"w1","shell":true,"max":10}`, &cr); code != http.StatusOK || len(cr.Jobs) == 0 {
			t.Fatalf("claim: %d %+v %d jobs", code, werr, len(cr.Jobs))
		}
		for _, c := range cr.Jobs {
			if got := get(c.ID); got.Waiting != "" || got.WaitingCode != "" {
				t.Errorf("running job %s: waiting %q %q", c.ID, got.WaitingCode, got.Waiting)
			}
		}
	})
}

// TestRetriedJobShowsNoStaleAttempt: a job pending again after a failed
// attempt shows no worker, exit code, output or error as current; its
// history keeps them, and its wait names the retry.
func TestRetriedJobShowsNoStaleAttempt(t *testing.T) {
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	e := newSchedEnv(t, start, nil)
	var j wire.Job
	if code, werr := e.do(http.MethodPost, "/jobs", `{"command":"false","max_attempts":3,"backoff":{"base":"10s","max":"10s"}}`, &j); code != http.StatusCreated {
		t.Fatalf("submit: %d %+v", code, werr)
	}
	var cr wire.ClaimResponse
	if code, werr := e.do(http.MethodPost, "/jobs/claim", `{"worker_id":"w1","shell":true}`, &cr); code != http.StatusOK || len(cr.Jobs) != 1 {
		t.Fatalf("claim: %d %+v", code, werr)
	}
	body := fmt.Sprintf(`{"lease":%d,"exit_code":1,"output":"boom","error":"exit status 1"}`, cr.Jobs[0].Lease)
	if code, werr := e.do(http.MethodPost, "/jobs/"+j.ID+"/fail", body, nil); code != http.StatusOK {
		t.Fatalf("fail: %d %+v", code, werr)
	}
	var got wire.Job
	if code, werr := e.do(http.MethodGet, "/jobs/"+j.ID, nil, &got); code != http.StatusOK {
		t.Fatalf("get: %d %+v", code, werr)
	}
	if got.Status != wire.StatusScheduled {
		t.Fatalf("status %s, want scheduled (the retry's backoff)", got.Status)
	}
	if got.WorkerID != "" || got.ExitCode != nil || got.Output != "" || got.LastError != "" {
		t.Errorf("the failed attempt shows as current: worker %q exit %v output %q error %q", got.WorkerID, got.ExitCode, got.Output, got.LastError)
	}
	if n := len(got.AttemptHistory); n != 1 || got.AttemptHistory[0].WorkerID != "w1" || got.AttemptHistory[0].ExitCode == nil || got.AttemptHistory[0].Error != "exit status 1" {
		t.Errorf("history lost the attempt: %+v", got.AttemptHistory)
	}
	if got.WaitingCode != wire.WaitDelay || !strings.HasPrefix(got.Waiting, "attempt 1 of 3 failed (exit status 1); attempt 2 runs at ") {
		t.Errorf("waiting = %q %q", got.WaitingCode, got.Waiting)
	}
}

// TestPauseUnusedQueue: a queue may be paused before any job uses it, and
// is then listed, paused, with empty counts.
func TestPauseUnusedQueue(t *testing.T) {
	e := newSchedEnv(t, time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), nil)
	var q wire.Queue
	if code, werr := e.do(http.MethodPost, "/queues/fresh/pause", nil, &q); code != http.StatusOK || !q.Paused {
		t.Fatalf("pause: %d %+v %+v", code, werr, q)
	}
	var list wire.QueueList
	if code, werr := e.do(http.MethodGet, "/queues", nil, &list); code != http.StatusOK {
		t.Fatalf("queues: %d %+v", code, werr)
	}
	if len(list.Queues) != 1 || list.Queues[0].Name != "fresh" || !list.Queues[0].Paused || list.Queues[0].Counts == nil || len(list.Queues[0].Counts) != 0 {
		t.Errorf("queues = %+v", list.Queues)
	}
	if code, werr := e.do(http.MethodPost, "/queues/bad%20name/pause", nil, nil); code != http.StatusBadRequest || !strings.HasPrefix(werr.Error, "name") {
		t.Errorf("a bad name: %d %+v", code, werr)
	}
}

// TestWaitingOfAParkedJob: a job parked on a durable step waits for what
// it parked on, not for a worker: its waiting says so even when no worker
// serves its queue any more.
func TestWaitingOfAParkedJob(t *testing.T) {
	e := newSchedEnv(t, time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), nil)
	var j wire.Job
	if code, werr := e.do(http.MethodPost, "/jobs", `{"command":"true","queue":"orders"}`, &j); code != http.StatusCreated {
		t.Fatalf("submit: %d %+v", code, werr)
	}
	var cr wire.ClaimResponse
	if code, werr := e.do(http.MethodPost, "/jobs/claim", `{"worker_id":"w1","queues":["orders"],"shell":true}`, &cr); code != http.StatusOK || len(cr.Jobs) != 1 {
		t.Fatalf("claim: %d %+v", code, werr)
	}
	var rep wire.ParkReply
	body := fmt.Sprintf(`{"lease":%d,"event":"payment.settled","key":"order-1","timeout_ms":3600000}`, cr.Jobs[0].Lease)
	if code, werr := e.do(http.MethodPost, "/jobs/"+j.ID+"/steps/settled/wait", body, &rep); code != http.StatusCreated || !rep.Parked {
		t.Fatalf("wait: %d %+v %+v", code, werr, rep)
	}
	var got wire.Job
	if code, werr := e.do(http.MethodGet, "/jobs/"+j.ID, nil, &got); code != http.StatusOK {
		t.Fatalf("get: %d %+v", code, werr)
	}
	if got.WaitingCode != wire.WaitDelay || !strings.HasPrefix(got.Waiting, "parked on wait step settled (attempt 1)") {
		t.Errorf("a parked job waits %q %q, want delay, parked on wait step settled", got.WaitingCode, got.Waiting)
	}
}
