package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
)

// TestProgressAndResults: a worker heartbeat's progress and a report's
// result are checked, kept with the job, shown by GET /jobs/{id}, and a
// dependent's claim carries its parents' results.
func TestProgressAndResults(t *testing.T) {
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	running := func(t *testing.T) (*schedEnv, wire.Job) {
		e := newSchedEnv(t, start, nil)
		if code, werr := e.do(http.MethodPost, "/jobs", `{"command":"true"}`, nil); code != http.StatusCreated {
			t.Fatalf("submit: %d %+v", code, werr)
		}
		var cr wire.ClaimResponse
		if code, werr := e.do(http.MethodPost, "/jobs/claim", `{"worker_id":"w1","shell":true}`, &cr); code != http.StatusOK || len(cr.Jobs) != 1 {
			t.Fatalf("claim: %d %+v", code, werr)
		}
		return e, cr.Jobs[0]
	}
	get := func(e *schedEnv, id string) wire.Job {
		var j wire.Job
		if code, werr := e.do(http.MethodGet, "/jobs/"+id, nil, &j); code != http.StatusOK {
			t.Fatalf("get %s: %d %+v", id, code, werr)
		}
		return j
	}
	heartbeat := func(j wire.Job, p *wire.ProgressUpdate) wire.WorkerHeartbeatRequest {
		return wire.WorkerHeartbeatRequest{Jobs: []wire.JobLease{{JobID: j.ID, Lease: j.Lease, Progress: p}}}
	}

	t.Run("GetShowsTheLatestProgress", func(t *testing.T) {
		e, j := running(t)
		e.clock.Add(time.Second)
		for _, p := range []wire.ProgressUpdate{{Percent: 10, Message: "start"}, {Percent: 40, Message: "copying files"}} {
			if code, werr := e.do(http.MethodPost, "/workers/w1/heartbeat", heartbeat(j, &p), nil); code != http.StatusOK {
				t.Fatalf("heartbeat: %d %+v", code, werr)
			}
		}
		got := get(e, j.ID).Progress
		if got == nil || got.Percent != 40 || got.Message != "copying files" || !got.At.Equal(start.Add(time.Second)) {
			t.Fatalf("progress = %+v, want 40 %q at start+1s", got, "copying files")
		}
	})

	t.Run("AJobsOwnHeartbeatTakesProgressToo", func(t *testing.T) {
		e, j := running(t)
		e.clock.Add(time.Second)
		path := "/jobs/" + j.ID + "/heartbeat"
		body := fmt.Sprintf(`{"lease":%d,"progress":{"percent":20,"message":"seed heartbeat"}}`, j.Lease)
		if code, werr := e.do(http.MethodPost, path, body, nil); code != http.StatusOK {
			t.Fatalf("heartbeat with progress: %d %+v", code, werr)
		}
		want := wire.Progress{Percent: 20, Message: "seed heartbeat", At: start.Add(time.Second)}
		if got := get(e, j.ID).Progress; got == nil || *got != want {
			t.Fatalf("progress = %+v, want %+v", got, want)
		}
		// The old body renews and keeps it; bad progress is refused whole.
		e.clock.Add(time.Second)
		var hb wire.HeartbeatResponse
		if code, werr := e.do(http.MethodPost, path, fmt.Sprintf(`{"lease":%d}`, j.Lease), &hb); code != http.StatusOK || hb.LeaseExpiresAt == nil {
			t.Fatalf("heartbeat without progress: %d %+v %+v", code, werr, hb)
		}
		for body, field := range map[string]string{
			`{"lease":%d,"progress":{"percent":101}}`: "progress.percent",
			`{"lease":%d,"progress":{"percent":-5}}`:  "progress.percent",
			`{"lease":%d,"progress":{"percent":1,"message":"` + strings.Repeat("x", wire.MaxProgressMessage+1) + `"}}`: "progress.message",
		} {
			code, werr := e.do(http.MethodPost, path, fmt.Sprintf(body, j.Lease), nil)
			if code != http.StatusBadRequest || !strings.HasPrefix(werr.Error, field+":") {
				t.Errorf("%s: %d %+v, want 400 naming %s", body, code, werr, field)
			}
		}
		if got := get(e, j.ID); got.Progress == nil || *got.Progress != want || !got.LeaseExpiresAt.Equal(hb.LeaseExpiresAt.UTC()) {
			t.Fatalf("after refused heartbeats: progress %+v lease until %v, want %+v until %v", got.Progress, got.LeaseExpiresAt, want, hb.LeaseExpiresAt)
		}
	})

	t.Run("BadProgressIs400NamingTheField", func(t *testing.T) {
		e, j := running(t)
		for _, c := range []struct {
			p     wire.ProgressUpdate
			field string
		}{
			{wire.ProgressUpdate{Percent: 101}, "jobs[0].progress.percent"},
			{wire.ProgressUpdate{Percent: -1}, "jobs[0].progress.percent"},
			{wire.ProgressUpdate{Percent: 5, Message: strings.Repeat("x", wire.MaxProgressMessage+1)}, "jobs[0].progress.message"},
		} {
			code, werr := e.do(http.MethodPost, "/workers/w1/heartbeat", heartbeat(j, &c.p), nil)
			if code != http.StatusBadRequest || !strings.HasPrefix(werr.Error, c.field+":") {
				t.Errorf("progress %+v: %d %+v, want 400 naming %s", c.p, code, werr, c.field)
			}
		}
		if p := get(e, j.ID).Progress; p != nil {
			t.Fatalf("refused progress stored: %+v", p)
		}
	})

	t.Run("DoneStoresTheResult", func(t *testing.T) {
		e, j := running(t)
		body := fmt.Sprintf(`{"lease":%d,"result":{"rows":12,"files":["a","b"]}}`, j.Lease)
		if code, werr := e.do(http.MethodPost, "/jobs/"+j.ID+"/done", body, nil); code != http.StatusOK {
			t.Fatalf("done: %d %+v", code, werr)
		}
		if got := get(e, j.ID).Result; string(got) != `{"rows":12,"files":["a","b"]}` {
			t.Fatalf("result = %s", got)
		}
	})

	t.Run("AReportsProgressIsKeptAndChecked", func(t *testing.T) {
		e, j := running(t)
		code, werr := e.do(http.MethodPost, "/jobs/"+j.ID+"/done", fmt.Sprintf(`{"lease":%d,"progress":{"percent":101}}`, j.Lease), nil)
		if code != http.StatusBadRequest || !strings.HasPrefix(werr.Error, "progress.percent:") {
			t.Fatalf("done with percent 101: %d %+v, want 400 naming progress.percent", code, werr)
		}
		batch := fmt.Sprintf(`{"reports":[{"job_id":%q,"status":"done","lease":%d,"progress":{"percent":100,"message":"%s"}}]}`,
			j.ID, j.Lease, strings.Repeat("m", wire.MaxProgressMessage+1))
		if code, werr := e.do(http.MethodPost, "/jobs/reports", batch, nil); code != http.StatusBadRequest || !strings.HasPrefix(werr.Error, "reports[0].progress.message:") {
			t.Fatalf("reports with a long message: %d %+v, want 400 naming reports[0].progress.message", code, werr)
		}
		if code, werr := e.do(http.MethodPost, "/jobs/"+j.ID+"/done", fmt.Sprintf(`{"lease":%d,"progress":{"percent":100,"message":"all"}}`, j.Lease), nil); code != http.StatusOK {
			t.Fatalf("done: %d %+v", code, werr)
		}
		if p := get(e, j.ID).Progress; p == nil || p.Percent != 100 || p.Message != "all" {
			t.Fatalf("progress = %+v, want the report's", p)
		}
	})

	t.Run("TooLargeResultIs413NamingTheField", func(t *testing.T) {
		e, j := running(t)
		big := `"` + strings.Repeat("x", wire.MaxResultBytes) + `"`
		code, werr := e.do(http.MethodPost, "/jobs/"+j.ID+"/done", fmt.Sprintf(`{"lease":%d,"result":%s}`, j.Lease, big), nil)
		if code != http.StatusRequestEntityTooLarge || werr.Code != wire.CodeTooLarge || !strings.HasPrefix(werr.Error, "result:") {
			t.Fatalf("done: %d %+v, want 413 too_large naming result", code, werr)
		}
		batch := fmt.Sprintf(`{"reports":[{"job_id":%q,"status":"done","lease":%d,"result":%s}]}`, j.ID, j.Lease, big)
		code, werr = e.do(http.MethodPost, "/jobs/reports", batch, nil)
		if code != http.StatusRequestEntityTooLarge || !strings.HasPrefix(werr.Error, "reports[0].result:") {
			t.Fatalf("reports: %d %+v, want 413 naming reports[0].result", code, werr)
		}
		if got := get(e, j.ID); got.Status != wire.StatusRunning || got.Result != nil {
			t.Fatalf("after refusals: %s result %s, want running without one", got.Status, got.Result)
		}
	})

	t.Run("ADependentsClaimCarriesItsParentsResults", func(t *testing.T) {
		e := newSchedEnv(t, start, nil)
		var list wire.JobList
		batch := `{"jobs":[{"command":"parent"},{"command":"other"},{"command":"child","depends_on":["$0","$1"]}]}`
		if code, werr := e.do(http.MethodPost, "/jobs/batch", batch, &list); code != http.StatusCreated {
			t.Fatalf("batch: %d %+v", code, werr)
		}
		parent, other, child := list.Jobs[0], list.Jobs[1], list.Jobs[2]
		var cr wire.ClaimResponse
		if code, werr := e.do(http.MethodPost, "/jobs/claim", `{"worker_id":"w1","shell":true,"max":2}`, &cr); code != http.StatusOK || len(cr.Jobs) != 2 {
			t.Fatalf("claim: %d %+v %d jobs", code, werr, len(cr.Jobs))
		}
		leases := map[string]uint64{cr.Jobs[0].ID: cr.Jobs[0].Lease, cr.Jobs[1].ID: cr.Jobs[1].Lease}
		reports := fmt.Sprintf(`{"reports":[{"job_id":%q,"status":"done","lease":%d,"result":{"url":"s3://x"}},{"job_id":%q,"status":"done","lease":%d}]}`,
			parent.ID, leases[parent.ID], other.ID, leases[other.ID])
		if code, werr := e.do(http.MethodPost, "/jobs/reports", reports, nil); code != http.StatusOK {
			t.Fatalf("reports: %d %+v", code, werr)
		}
		cr = wire.ClaimResponse{}
		if code, werr := e.do(http.MethodPost, "/jobs/claim", `{"worker_id":"w1","shell":true}`, &cr); code != http.StatusOK || len(cr.Jobs) != 1 || cr.Jobs[0].ID != child.ID {
			t.Fatalf("claim of the child: %d %+v %+v", code, werr, cr.Jobs)
		}
		want := map[string]json.RawMessage{parent.ID: json.RawMessage(`{"url":"s3://x"}`)}
		if got := cr.Jobs[0].ParentResults; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("parent_results = %s, want %s (a parent without a result left out)", got, want)
		}
		if got := get(e, parent.ID).Result; string(got) != `{"url":"s3://x"}` {
			t.Fatalf("GET of the parent: result %s", got)
		}
	})
}

// TestProgressLimitsMatchTheFSM: the API's limits are the state machine's.
func TestProgressLimitsMatchTheFSM(t *testing.T) {
	if wire.MaxProgressMessage != fsm.MaxProgressMessage || wire.MaxResultBytes != fsm.MaxResultBytes {
		t.Fatalf("wire limits %d, %d; fsm %d, %d", wire.MaxProgressMessage, wire.MaxResultBytes, fsm.MaxProgressMessage, fsm.MaxResultBytes)
	}
}
