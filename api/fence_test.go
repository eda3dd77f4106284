package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

// Tokens of the fence tests: a client, and two worker fleets.
const (
	fenceClient = "fence-client-0123456789"
	fleet1      = "fleet-one-token-0123456789"
	fleet2      = "fleet-two-token-0123456789"
)

// fenceEnv is a Server with auth on and the tokens above.
func fenceEnv(t *testing.T) *schedEnv {
	t.Helper()
	e, _ := authEnv(t, func(c *Config) {
		tok, err := ParseTokens(strings.NewReader("client " + fenceClient + "\nworker " + fleet1 + " fleet1\nworker " + fleet2 + " fleet2\n"))
		if err != nil {
			t.Fatal(err)
		}
		c.Auth = tok
	})
	return e
}

// call sends a request with a token and checks the status it gets.
func (e *schedEnv) call(want int, method, path, token, body string) *httptest.ResponseRecorder {
	e.t.Helper()
	rec := e.request(method, path, token, body)
	if rec.Code != want {
		e.t.Fatalf("%s %s: HTTP %d %s, want %d", method, path, rec.Code, rec.Body, want)
	}
	return rec
}

// fenceSubmit submits a shell job as the client and returns its id.
func (e *schedEnv) fenceSubmit(body string) string {
	e.t.Helper()
	var j wire.Job
	mustUnmarshal(e.t, e.call(http.StatusCreated, "POST", "/jobs", fenceClient, body), &j)
	return j.ID
}

// fenceJob reads a job as the client.
func (e *schedEnv) fenceJob(id string) wire.Job {
	e.t.Helper()
	var j wire.Job
	mustUnmarshal(e.t, e.call(http.StatusOK, "GET", "/jobs/"+id, fenceClient, ""), &j)
	return j
}

// fenceClaim claims one job for worker w with token and returns it.
func (e *schedEnv) fenceClaim(token, worker string, seq uint64) wire.Job {
	e.t.Helper()
	var out wire.ClaimResponse
	body := fmt.Sprintf(`{"worker_id":%q,"claim_seq":%d}`, worker, seq)
	mustUnmarshal(e.t, e.call(http.StatusOK, "POST", "/jobs/claim", token, body), &out)
	if len(out.Jobs) != 1 || out.Jobs[0].Lease == 0 {
		e.t.Fatalf("claim got %+v, want one leased job", out.Jobs)
	}
	return out.Jobs[0]
}

func mustUnmarshal(t testing.TB, rec *httptest.ResponseRecorder, v any) {
	t.Helper()
	if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
		t.Fatalf("reply %q: %v", rec.Body, err)
	}
}

// TestFence checks, with auth on, that a worker token can act only on the
// attempts it claimed and as the worker ids it registered, and that a
// leased attempt needs its lease (issue #14, part 1).
func TestFence(t *testing.T) {
	t.Run("AnotherTokenCannotEndOrRenewAClaimedJob", func(t *testing.T) {
		e := fenceEnv(t)
		id := e.fenceSubmit(`{"command":"true"}`)
		j := e.fenceClaim(fleet1, "w1", 0)
		lease := fmt.Sprint(j.Lease)
		for _, c := range []struct{ path, body string }{
			{"/jobs/" + id + "/done", `{"output":"forged"}`},
			{"/jobs/" + id + "/done", `{"output":"forged","lease":` + lease + `}`},
			{"/jobs/" + id + "/fail", `{"retry":false}`},
			{"/jobs/" + id + "/fail", `{"retry":false,"lease":` + lease + `}`},
			{"/jobs/" + id + "/heartbeat", `{"lease":` + lease + `}`},
			{"/jobs/" + id + "/heartbeat", ``},
		} {
			if rec := e.call(http.StatusForbidden, "POST", c.path, fleet2, c.body); errorCode(t, rec) != "forbidden" {
				t.Errorf("%s %s: code %s", c.path, c.body, rec.Body)
			}
		}
		var batch wire.BatchReportResponse
		mustUnmarshal(t, e.call(http.StatusOK, "POST", "/jobs/reports", fleet2,
			`{"reports":[{"job_id":"`+id+`","status":"done","output":"forged","lease":`+lease+`}]}`), &batch)
		if len(batch.Results) != 1 || batch.Results[0].Code != "forbidden" {
			t.Fatalf("batch report by another token: %+v", batch.Results)
		}
		if got := e.fenceJob(id); got.Status != wire.StatusRunning || got.Output != "" {
			t.Fatalf("after another token's reports: %s %q", got.Status, got.Output)
		}

		var done wire.Job
		mustUnmarshal(t, e.call(http.StatusOK, "POST", "/jobs/"+id+"/done", fleet1, `{"output":"real","lease":`+lease+`}`), &done)
		if done.Status != wire.StatusDone || done.Output != "real" {
			t.Fatalf("the claimer's report: %s %q", done.Status, done.Output)
		}
	})

	t.Run("ALeasedAttemptNeedsItsLease", func(t *testing.T) {
		e := fenceEnv(t)
		id := e.fenceSubmit(`{"command":"true"}`)
		j := e.fenceClaim(fleet1, "w1", 0)
		for _, path := range []string{"/done", "/fail", "/heartbeat"} {
			if rec := e.call(http.StatusConflict, "POST", "/jobs/"+id+path, fleet1, ""); errorCode(t, rec) != "lease_required" {
				t.Errorf("%s without a lease: %s", path, rec.Body)
			}
		}
		e.call(http.StatusOK, "POST", "/jobs/"+id+"/heartbeat", fleet1, fmt.Sprintf(`{"lease":%d}`, j.Lease))
		e.call(http.StatusOK, "POST", "/jobs/"+id+"/fail", fleet1, fmt.Sprintf(`{"lease":%d,"retry":false}`, j.Lease))
		if got := e.fenceJob(id); got.Status != wire.StatusFailed {
			t.Fatalf("after the claimer's fail: %s", got.Status)
		}
	})

	t.Run("AWorkerIDIsItsRegisteringTokens", func(t *testing.T) {
		e := fenceEnv(t)
		e.call(http.StatusCreated, "POST", "/workers/register", fleet1, `{"id":"w1","resources":{"vram_mb":100,"memory_mb":100}}`)
		e.call(http.StatusForbidden, "POST", "/workers/register", fleet2, `{"id":"w1","resources":{"vram_mb":9999,"memory_mb":9999}}`)
		e.call(http.StatusForbidden, "POST", "/workers/w1/heartbeat", fleet2, "")
		e.call(http.StatusForbidden, "POST", "/workers/w1/heartbeat", fleet2, `{"jobs":[]}`)
		var list wire.WorkerList
		mustUnmarshal(t, e.call(http.StatusOK, "GET", "/workers", fenceClient, ""), &list)
		if len(list.Workers) != 1 || list.Workers[0].Resources.VRAMMB != 100 {
			t.Fatalf("workers after another token's register: %+v", list.Workers)
		}
		e.call(http.StatusOK, "POST", "/workers/w1/heartbeat", fleet1, "")
		e.call(http.StatusCreated, "POST", "/workers/register", fleet1, `{"id":"w1","resources":{"vram_mb":200,"memory_mb":100}}`)
	})

	t.Run("ASilentWorkersIDCanBeTakenOver", func(t *testing.T) {
		// Once w1 has been silent past --worker-offline-after, its id is
		// free for another token; the old one may no longer heartbeat.
		e := fenceEnv(t)
		e.call(http.StatusCreated, "POST", "/workers/register", fleet1, `{"id":"w1"}`)
		e.call(http.StatusForbidden, "POST", "/workers/register", fleet2, `{"id":"w1"}`)
		e.clock.Add(e.srv.live.OfflineAfter() + time.Second)
		e.call(http.StatusCreated, "POST", "/workers/register", fleet2, `{"id":"w1","resources":{"vram_mb":300,"memory_mb":100}}`)
		e.call(http.StatusForbidden, "POST", "/workers/w1/heartbeat", fleet1, "")
	})

	t.Run("ALostClaimReplyIsGivenBackAtTheNextHeartbeat", func(t *testing.T) {
		// Issue #15, part 3: the reply of claim 5 never reached w1.
		e := fenceEnv(t)
		id := e.fenceSubmit(`{"command":"true","max_attempts":1}`)
		e.call(http.StatusCreated, "POST", "/workers/register", fleet1, `{"id":"w1"}`)
		e.fenceClaim(fleet1, "w1", 5)
		e.call(http.StatusOK, "POST", "/workers/w1/heartbeat", fleet1, `{"jobs":[],"claims_from":1,"claims_to":4}`)
		if got := e.fenceJob(id); got.Status != wire.StatusRunning {
			t.Fatalf("a heartbeat sent before claim 5 ended judged it: %s", got.Status)
		}
		e.call(http.StatusOK, "POST", "/workers/w1/heartbeat", fleet1, `{"jobs":[],"claims_from":1,"claims_to":5}`)
		if got := e.fenceJob(id); got.Status != wire.StatusPending || got.Attempts != 0 {
			t.Fatalf("after the heartbeat: %s with %d attempts, want pending with 0", got.Status, got.Attempts)
		}
		j := e.fenceClaim(fleet1, "w1", 6)
		e.call(http.StatusOK, "POST", "/jobs/"+id+"/done", fleet1, fmt.Sprintf(`{"lease":%d}`, j.Lease))
		if got := e.fenceJob(id); got.Status != wire.StatusDone || got.Attempts != 1 {
			t.Fatalf("the one attempt: %s with %d attempts", got.Status, got.Attempts)
		}
		e.call(http.StatusBadRequest, "POST", "/workers/w1/heartbeat", fleet1, `{"jobs":[],"claims_from":7,"claims_to":6}`)
	})
}

// TestSeedWorkerUnchanged runs a v0 worker calls (GET /jobs/next,
// then heartbeats and reports without a body) with auth on and off.
func TestSeedWorkerUnchanged(t *testing.T) {
	for _, auth := range []bool{true, false} {
		t.Run(fmt.Sprintf("Auth%v", auth), func(t *testing.T) {
			e := fenceEnv(t)
			client, worker := fenceClient, fleet1
			if !auth {
				e.srv.cfg.Auth = nil
				e.h = e.srv.Handler()
				client, worker = "", ""
			}
			for range 2 {
				var sub wire.Job
				mustUnmarshal(t, e.call(http.StatusCreated, "POST", "/jobs", client, `{"command":"true","max_retries":2}`), &sub)
				e.call(http.StatusCreated, "POST", "/workers/register", worker,
					`{"id":"seed-1","exec_addr":"","resources":{"vram_mb":0,"memory_mb":0},"tags":null,"status":"","last_heartbeat":"0001-01-01T00:00:00Z","registered_at":"0001-01-01T00:00:00Z"}`)
				var j wire.Job
				mustUnmarshal(t, e.call(http.StatusOK, "GET", "/jobs/next?worker_id=seed-1", worker, ""), &j)
				e.call(http.StatusOK, "POST", "/workers/seed-1/heartbeat", worker, "")
				e.call(http.StatusOK, "POST", "/jobs/"+j.ID+"/heartbeat", worker, "")
				e.call(http.StatusOK, "POST", "/jobs/"+j.ID+"/fail", worker, "")
				e.clock.Add(time.Hour) // past the retry's backoff
				mustUnmarshal(t, e.call(http.StatusOK, "GET", "/jobs/next?worker_id=seed-1", worker, ""), &j)
				e.call(http.StatusOK, "POST", "/jobs/"+j.ID+"/done", worker, "")
				var got wire.Job
				mustUnmarshal(t, e.call(http.StatusOK, "GET", "/jobs/"+sub.ID, client, ""), &got)
				if got.Status != wire.StatusDone || got.Attempts != 2 {
					t.Fatalf("seed job: %s after %d attempts", got.Status, got.Attempts)
				}
			}
			e.call(http.StatusNoContent, "GET", "/jobs/next?worker_id=seed-1", worker, "")
		})
	}
}
