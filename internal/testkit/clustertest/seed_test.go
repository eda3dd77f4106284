package clustertest_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

// seedJob is the part of a job a v0 worker decodes.
type seedJob struct {
	ID         string            `json:"id"`
	Command    string            `json:"command"`
	Env        map[string]string `json:"env"`
	Attempts   int               `json:"attempts"`
	MaxRetries int               `json:"max_retries"`
	Status     string            `json:"status"`
}

// TestSeedWorkerProtocol plays a worker written for the v0 worker API: raw
// HTTP, no bodies where it sends none, the status codes SEED-API.md lists.
func TestSeedWorkerProtocol(t *testing.T) {
	c := newCluster(t, 3)
	f := c.Followers(t)
	url := c.URL(f[0]) // a v0 worker talks to whichever node it was given
	const worker = "seed-worker-1"

	t.Run("RegisterIs201TwiceWithZeroTimes", func(t *testing.T) {
		body := `{"id":"seed-worker-1","exec_addr":"10.0.0.7:9000","resources":{"vram_mb":8192,"memory_mb":16384},` +
			`"tags":["gpu"],"status":"idle","last_heartbeat":"0001-01-01T00:00:00Z","registered_at":"0001-01-01T00:00:00Z"}`
		call(t, http.StatusCreated, http.MethodPost, url+"/workers/register", body)
		call(t, http.StatusCreated, http.MethodPost, c.URL(f[1])+"/workers/register", body)
	})

	t.Run("WorkerHeartbeatWithoutBodyIs200And404WhenUnknown", func(t *testing.T) {
		call(t, http.StatusOK, http.MethodPost, url+"/workers/"+worker+"/heartbeat", nil)
		wantError(t, send(t, http.MethodPost, url+"/workers/nobody/heartbeat", nil), http.StatusNotFound, "not_found")
	})

	t.Run("NextIs204WhenThereIsNoJob", func(t *testing.T) {
		r := call(t, http.StatusNoContent, http.MethodGet, url+"/jobs/next?worker_id="+worker, nil)
		if len(r.Body) != 0 {
			t.Errorf("204 with a body: %q", r.Body)
		}
	})

	var first seedJob
	t.Run("SubmitAcceptsSeedFields", func(t *testing.T) {
		body := `{"command":"echo seed","depends_on":[],"resources":{"vram_mb":0,"memory_mb":0},"priority":0,` +
			`"queue_name":"seedq","max_retries":2,"gang_size":0,"env":{"SEED":"1"}}`
		j := decode[wire.Job](t, call(t, http.StatusCreated, http.MethodPost, url+"/jobs", body))
		if j.Queue != "seedq" || j.MaxAttempts != 2 || j.MaxRetries != 2 {
			t.Fatalf("seed submit gave queue %q max_attempts %d max_retries %d", j.Queue, j.MaxAttempts, j.MaxRetries)
		}
		first.ID = j.ID
	})

	t.Run("NextReturnsTheJobWithSeedFields", func(t *testing.T) {
		r := call(t, http.StatusOK, http.MethodGet, url+"/jobs/next?worker_id="+worker, nil)
		j := decode[seedJob](t, r)
		if j.ID != first.ID || j.Command != "echo seed" || j.Env["SEED"] != "1" || j.Attempts != 1 || j.MaxRetries != 2 {
			t.Fatalf("/jobs/next = %s", r)
		}
		var raw map[string]json.RawMessage
		_ = json.Unmarshal(r.Body, &raw)
		for _, k := range []string{"id", "command", "env", "attempts", "max_retries"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("/jobs/next reply lacks %q: %s", k, r)
			}
		}
	})

	t.Run("JobHeartbeatWithoutBodyIs200", func(t *testing.T) {
		r := call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+first.ID+"/heartbeat", nil)
		if len(r.Body) > 0 {
			hb := decode[wire.HeartbeatResponse](t, r)
			if hb.Action == wire.ActionPreempt {
				t.Errorf("heartbeat of a healthy job says preempt: %s", r)
			}
		}
	})

	t.Run("DoneWithoutBodyIs200", func(t *testing.T) {
		call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+first.ID+"/done", nil)
		if j := getJob(t, url, first.ID); j.Status != wire.StatusDone || j.WorkerID != worker {
			t.Fatalf("after done: %+v", j)
		}
	})

	t.Run("DoneOnAJobThatIsNotRunningIs409", func(t *testing.T) {
		wantError(t, send(t, http.MethodPost, url+"/jobs/"+first.ID+"/done", nil), http.StatusConflict, "not_running")
		wantError(t, send(t, http.MethodPost, url+"/jobs/"+first.ID+"/fail", nil), http.StatusConflict, "not_running")
	})

	t.Run("UnknownJobIs404", func(t *testing.T) {
		for _, verb := range []string{"done", "fail", "heartbeat"} {
			wantError(t, send(t, http.MethodPost, url+"/jobs/job-999999/"+verb, nil), http.StatusNotFound, "not_found")
		}
	})

	t.Run("FailWithoutBodyIs200AndRetriesWhileAttemptsAreLeft", func(t *testing.T) {
		// The v0 worker API's submitters give no backoff; this test gives a short
		// one so the retry comes quickly.
		j := submit(t, url, map[string]any{"command": "exit 3", "queue_name": "seedq", "max_retries": 2, "backoff": map[string]string{"base": "10ms"}})
		got := decode[seedJob](t, call(t, http.StatusOK, http.MethodGet, url+"/jobs/next?worker_id="+worker+"&queue=seedq", nil))
		if got.ID != j.ID || got.Attempts != 1 {
			t.Fatalf("/jobs/next = %+v", got)
		}
		after := decode[wire.Job](t, call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+j.ID+"/fail", nil))
		if after.Status != wire.StatusPending && after.Status != wire.StatusScheduled {
			t.Fatalf("after the first fail (1 of 2 attempts) the job is %s, want it retried", after.Status)
		}
		got = decode[seedJob](t, call(t, http.StatusOK, http.MethodGet, url+"/jobs/next?worker_id="+worker+"&wait=5s", nil))
		if got.ID != j.ID || got.Attempts != 2 {
			t.Fatalf("retry claim = %+v, want attempt 2 of %s", got, j.ID)
		}
		final := decode[wire.Job](t, call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+j.ID+"/fail", nil))
		if final.Status != wire.StatusFailed || final.Attempts != 2 {
			t.Fatalf("after the second fail the job is %s with %d attempts, want failed after 2", final.Status, final.Attempts)
		}
		wantError(t, send(t, http.MethodPost, url+"/jobs/"+j.ID+"/done", nil), http.StatusConflict, "not_running")
	})

	t.Run("ListIsPagedObject", func(t *testing.T) {
		list := decode[wire.JobList](t, call(t, http.StatusOK, http.MethodGet, url+"/jobs?limit=1", nil))
		if len(list.Jobs) != 1 || list.NextCursor == "" {
			t.Errorf("GET /jobs?limit=1 = %d jobs, next_cursor %q", len(list.Jobs), list.NextCursor)
		}
	})
	c.Converged(t, 5*time.Second)
}
