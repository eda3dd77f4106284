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

// TestOpenAPIScenario calls every route of the document at least once, its
// common successes and some refusals, through contractHandler: each
// request and reply must validate against openapi.json.
func TestOpenAPIScenario(t *testing.T) {
	e := newSchedEnv(t, time.Now(), func(c *Config) { c.Pprof = true })
	hit := map[string]bool{}
	call := func(want int, method, path string, body any, out any) {
		t.Helper()
		_, pattern := e.srv.mux.Handler(httptest.NewRequest(method, path, nil))
		hit[pattern] = true
		code, werr := e.do(method, path, body, out)
		if want != 0 && code != want {
			t.Fatalf("%s %s: HTTP %d %+v, want %d", method, path, code, werr, want)
		}
	}

	var a, c wire.Job
	call(201, "POST", "/jobs", `{"command":"echo a","queue":"q","priority":3,"metadata":{"k":"v"},"timeout":"1m","backoff":{"base":"1s"}}`, &a)
	call(201, "POST", "/jobs/batch", `{"jobs":[{"type":"t","payload":{"x":1}},{"command":"b","depends_on":["$0"]}]}`, nil)
	call(200, "GET", "/jobs?status=pending&limit=1&metadata.k=v", nil, nil)
	call(200, "GET", "/jobs?filter=status+%3D%3D+pending+and+priority+%3E+0", nil, nil)
	call(200, "GET", "/jobs/count?filter=queue+%3D%3D+default&status=pending", nil, nil)
	call(400, "GET", "/jobs/count?filter=status+%3D", nil, nil)
	call(200, "GET", "/stats/series?step=5m&queue=q", nil, nil)
	call(400, "GET", "/stats/series?step=1s", nil, nil)
	call(200, "GET", "/jobs/"+a.ID, nil, nil)
	call(404, "GET", "/jobs/nope", nil, nil)
	call(400, "POST", "/jobs", `{"command":"x","max_attempts":0}`, nil)
	call(201, "POST", "/workers/register", `{"id":"w1","resources":{"vram_mb":0,"memory_mb":0,"slots":4},"queues":["q","default"],"tags":["x"]}`, nil)

	var claim wire.ClaimResponse
	call(200, "POST", "/jobs/claim", `{"worker_id":"w1","queues":["q"],"shell":true,"max":1,"wait":"0s","claim_seq":1}`, &claim)
	if len(claim.Jobs) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(claim.Jobs))
	}
	lease := claim.Jobs[0].Lease
	call(200, "POST", "/jobs/"+a.ID+"/heartbeat", fmt.Sprintf(`{"lease":%d,"progress":{"percent":10,"message":"started"}}`, lease), nil)
	call(200, "POST", "/workers/w1/heartbeat", fmt.Sprintf(`{"jobs":[{"job_id":%q,"lease":%d}],"claims_from":1,"claims_to":1}`, a.ID, lease), nil)
	call(200, "POST", "/workers/w1/actions", fmt.Sprintf(`{"known":[{"job_id":%q,"lease":%d}],"wait":"1ms"}`, a.ID, lease), nil)
	call(201, "PUT", "/jobs/"+a.ID+"/steps/charge", fmt.Sprintf(`{"lease":%d,"result":{"id":"ch_1"},"duration_ms":12}`, lease), nil)
	call(409, "PUT", "/jobs/"+a.ID+"/steps/charge", fmt.Sprintf(`{"lease":%d,"result":2}`, lease), nil)
	call(409, "PUT", "/jobs/"+a.ID+"/steps/send%232", fmt.Sprintf(`{"lease":%d}`, lease+100), nil)
	call(400, "PUT", "/jobs/"+a.ID+"/steps/send", fmt.Sprintf(`{"lease":%d,"status":"maybe"}`, lease), nil)
	call(200, "GET", "/jobs/"+a.ID+"/steps?limit=10", nil, nil)
	call(200, "GET", "/jobs/"+a.ID+"/steps/charge", nil, nil)
	call(404, "GET", "/jobs/"+a.ID+"/steps/send", nil, nil)
	call(202, "POST", "/events", `{"name":"paid","key":"o1","payload":{"n":1}}`, nil)
	call(400, "POST", "/events", `{"name":"","key":"o1"}`, nil)
	call(201, "POST", "/jobs/"+a.ID+"/steps/nap/sleep", fmt.Sprintf(`{"lease":%d,"duration_ms":0}`, lease), nil)
	call(201, "POST", "/jobs/"+a.ID+"/steps/pay/wait", fmt.Sprintf(`{"lease":%d,"event":"paid","key":"o1","timeout_ms":60000}`, lease), nil)
	call(400, "POST", "/jobs/"+a.ID+"/steps/pay%232/wait", fmt.Sprintf(`{"lease":%d}`, lease), nil)
	call(409, "POST", "/jobs/"+a.ID+"/steps/kid/invoke", fmt.Sprintf(`{"lease":%d,"job":{"command":"c"}}`, lease+100), nil)
	call(202, "POST", "/jobs/"+a.ID+"/signals/go", `{"payload":1}`, nil)
	call(404, "POST", "/jobs/nope/signals/go", `{}`, nil)
	call(200, "GET", "/jobs/"+a.ID, nil, nil)
	call(409, "POST", "/jobs/"+a.ID+"/done", fmt.Sprintf(`{"lease":%d}`, lease+100), nil)
	call(200, "POST", "/jobs/"+a.ID+"/done", fmt.Sprintf(`{"lease":%d,"output":"ok"}`, lease), nil)
	call(0, "GET", "/jobs/next?worker_id=w1&queue=default", nil, nil)
	call(200, "GET", "/jobs/"+a.ID+"/parent_results?cursor=0&limit=10", nil, nil)

	call(201, "POST", "/jobs", `{"command":"c","queue":"q"}`, &c)
	call(200, "POST", "/jobs/claim", `{"worker_id":"w1","queues":["q"],"shell":true,"claim_seq":2}`, &claim)
	call(200, "POST", "/jobs/reports", fmt.Sprintf(`{"reports":[{"job_id":%q,"status":"failed","lease":%d,"error":"boom","retry":false},{"job_id":"nope","status":"done","lease":1}]}`, c.ID, claim.Jobs[0].Lease), nil)
	call(200, "POST", "/jobs/"+c.ID+"/retry", nil, nil)
	call(200, "POST", "/jobs/"+c.ID+"/cancel?cascade=false", nil, nil)
	call(409, "POST", "/jobs/"+c.ID+"/cancel", nil, nil)
	var bulk wire.Bulk
	call(200, "POST", "/bulk", `{"action":"retry","status":"cancelled","queue":"q","dry_run":true}`, nil)
	call(201, "POST", "/bulk", `{"action":"priority","queue":"nosuch","metadata":{"k":"v"},"priority":5}`, &bulk)
	call(400, "POST", "/bulk", `{"action":"erase","queue":"q"}`, nil)
	call(200, "GET", "/bulk", nil, nil)
	call(200, "GET", "/bulk/"+bulk.ID, nil, nil)
	call(200, "POST", "/bulk/"+bulk.ID+"/stop", nil, nil)
	call(404, "GET", "/bulk/99", nil, nil)
	call(200, "POST", "/jobs/claim", `{"worker_id":"w1","queues":["q"],"shell":true,"claim_seq":3}`, nil)
	call(0, "POST", "/jobs/"+c.ID+"/fail", `{"lease":1,"error":"late"}`, nil)
	// A rate-limited attempt pauses its key (GET /queues shows it below).
	call(201, "POST", "/jobs", `{"command":"d","queue":"q","concurrency_key":"acme"}`, &c)
	call(200, "POST", "/jobs/claim", `{"worker_id":"w1","queues":["q"],"shell":true,"claim_seq":4}`, &claim)
	if len(claim.Jobs) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(claim.Jobs))
	}
	call(200, "POST", "/jobs/"+claim.Jobs[0].ID+"/fail", fmt.Sprintf(`{"lease":%d,"error":"429","rate_limited_for":"1m"}`, claim.Jobs[0].Lease), nil)

	var gang wire.GangSubmitResponse
	call(201, "POST", "/jobs", `{"command":"g","gang_size":2}`, &gang)
	call(200, "GET", "/gangs/"+gang.GangID, nil, nil)
	call(0, "POST", "/jobs/"+gang.Tasks[0]+"/checkpoint?epoch=1", "raw bytes", nil)
	call(0, "POST", "/jobs/"+gang.Tasks[0]+"/preempted?epoch=1", nil, nil)

	call(200, "GET", "/workers", nil, nil)
	call(409, "DELETE", "/workers/w1", nil, nil) // active: refused
	call(200, "PUT", "/queues/q", `{"concurrency":5,"key_concurrency":2,"rate":"100/s","burst":10,"key_rate":"600/m","key_burst":3,"key_weights":{"acme":3},`+
		`"rate_limit_pauses_queue":true,"max_pause":"2m"}`, nil)
	call(200, "GET", "/queues", nil, nil)
	call(200, "GET", "/queues/q", nil, nil)
	call(200, "GET", "/pauses?limit=10", nil, nil)
	call(200, "DELETE", "/queues/q/pauses?key=acme", nil, nil)
	call(200, "POST", "/queues/q/pause", nil, nil)
	call(200, "POST", "/queues/q/resume", nil, nil)

	sched := `{"name":"s1","cron":"0 3 * * *","timezone":"UTC","job":{"command":"x"},"overlap":"skip"}`
	call(201, "POST", "/schedules", sched, nil)
	call(200, "GET", "/schedules", nil, nil)
	call(200, "GET", "/schedules/s1", nil, nil)
	call(200, "PUT", "/schedules/s1", strings.Replace(sched, "0 3", "0 4", 1), nil)
	call(200, "POST", "/schedules/s1/pause", nil, nil)
	call(200, "POST", "/schedules/s1/resume", nil, nil)
	call(201, "POST", "/schedules/s1/trigger", nil, nil)
	call(204, "DELETE", "/schedules/s1", nil, nil)

	call(200, "GET", "/health", nil, nil)
	call(0, "GET", "/health?ready=1", nil, nil)
	call(200, "GET", "/cluster", nil, nil)
	call(200, "GET", "/cluster/read_index", nil, nil)
	call(200, "GET", "/jobs?stale=1", nil, nil)
	call(400, "GET", "/jobs?stale=maybe", nil, nil)
	call(0, "POST", "/cluster/join", `{"id":"n2","raft":"127.0.0.1:2","http":"http://127.0.0.1:3"}`, nil)
	call(0, "DELETE", "/cluster/nodes/n9", nil, nil)
	call(200, "GET", "/backup", nil, nil)
	call(0, "POST", "/restore", "not a backup", nil)
	call(200, "GET", "/debug/digest", nil, nil)
	call(200, "GET", "/metrics", nil, nil)
	var doc map[string]any
	call(200, "GET", "/openapi.json", nil, &doc)
	call(301, "GET", "/ui", nil, nil)
	call(200, "GET", "/ui/", nil, nil)
	call(302, "GET", "/", nil, nil)
	call(200, "GET", "/debug/pprof/", nil, nil)
	call(200, "POST", "/debug/pprof/symbol", "0x1", nil)
	call(404, "GET", "/no/such/route", nil, nil)

	for _, o := range apiOps {
		if !hit[o.pattern] {
			t.Errorf("the scenario never calls %s", o.pattern)
		}
	}
}

// contractRecorder stands in for a test's testing.TB to see what
// CheckContract reports.
type contractRecorder struct {
	testing.TB
	errors []string
}

func (r *contractRecorder) Helper() {}
func (r *contractRecorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// TestCheckContractRefusesDrift checks that the contract check fails a
// reply or an accepted request that does not match the document.
func TestCheckContractRefusesDrift(t *testing.T) {
	job, err := json.Marshal(wire.Job{ID: "job-1", Status: "pending", Queue: "default", MaxAttempts: 3, MaxRetries: 3})
	if err != nil {
		t.Fatal(err)
	}
	jsonHeader := http.Header{"Content-Type": {"application/json"}}
	for _, tc := range []struct {
		name      string
		reqBody   string
		status    int
		reply     string
		wantError bool
	}{
		{"a good exchange", `{"command":"x"}`, 201, string(job), false},
		{"a reply field of the wrong type", `{"command":"x"}`, 201, strings.Replace(string(job), `"attempts":0`, `"attempts":"none"`, 1), true},
		{"a reply missing a required field", `{"command":"x"}`, 201, `{"id":"job-1"}`, true},
		{"an accepted request of the wrong type", `{"command":"x","priority":"high"}`, 201, string(job), true},
		{"a refused request of the wrong type", `{"command":"x","priority":"high"}`, 400, `{"error":"priority: bad","code":"invalid"}`, false},
		{"an error reply not of the error shape", `{"command":"x"}`, 400, `{"message":"bad"}`, true},
	} {
		rec := &contractRecorder{TB: t}
		req := httptest.NewRequest(http.MethodPost, "/jobs", nil)
		CheckContract(rec, req, []byte(tc.reqBody), tc.status, jsonHeader, []byte(tc.reply))
		if got := len(rec.errors) > 0; got != tc.wantError {
			t.Errorf("%s: contract errors %q, want some: %v", tc.name, rec.errors, tc.wantError)
		}
	}
}
