package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

// The fuzz targets of the API's decoders. Each runs its seeds in every
// `go test`; .ci/run fuzzes each for a few seconds, and longer runs are
//
//	go test -run='^$' -fuzz='^FuzzSubmitDecoding$' -fuzztime=5m ./api
//
// What they hold: any body gets a JSON answer with a status the route
// documents, never a 5xx or a panic; a 400 changes nothing (validation
// happens before anything is proposed); what is accepted leaves a store
// whose invariants hold (newSchedEnv's cleanup checks them).

var fuzzEpoch = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// submitRoutes are the routes FuzzSubmitDecoding sends bodies to.
var submitRoutes = []string{"/jobs", "/jobs/batch", "/schedules", "/workers/register"}

func FuzzSubmitDecoding(f *testing.F) {
	seeds := []struct {
		route uint8
		body  string
	}{
		{0, `{"command":"echo hi","queue":"q","priority":5,"max_attempts":3,"timeout":"90s","delay":"5m"}`},
		{0, `{"type":"email","payload":{"to":"a@b"},"env":{"A":"1"},"metadata":{"k":"v"},"idempotency_key":"k"}`},
		{0, `{"command":"x","backoff":{"base":"1s","max":"1h","jitter":0.3},"retention":"1h","unique_for":"1h"}`},
		{0, `{"command":"x","run_at":"2030-01-01T00:00:00Z","depends_on":["job-1"]}`},
		{0, `{"command":"x","max_retries":2,"queue_name":"legacy"}`},
		{0, `{"command":`},
		{0, `[1,2,3]`},
		{0, `{"command":5}`},
		{0, `{"command":"x","timeout":"-5s"}`},
		{0, `{"command":"x","backoff":{"jitter":1e308,"base":"9223372036s"}}`},
		{0, `{"command":"x","priority":9223372036854775807,"max_attempts":-9223372036854775808}`},
		{0, `{"command":"x","run_at":"0001-01-01T00:00:00Z"}`},
		{0, `{"command":"x","delay":"2562047h"}`},
		{0, `{"command":"x","env":{"":"x"}}`},
		{0, strings.Repeat("[", 10000)},
		{0, "\xff\xfe{}"},
		{1, `{"jobs":[{"command":"a"},{"command":"b","depends_on":["$0"]}]}`},
		{1, `{"jobs":[{"command":"a","depends_on":["$1"]},{"command":"b","depends_on":["$0"]}]}`},
		{1, `{"jobs":[{"command":"a","depends_on":["$-1","$99999999999999999999"]}]}`},
		{1, `{"jobs":[]}`},
		{2, `{"name":"n","cron":"*/5 * * * *","timezone":"Europe/Paris","job":{"command":"x"},"overlap":"queue","catchup":"all"}`},
		{2, `{"name":"n","cron":"@every 1s","job":{"type":"t","payload":null}}`},
		{2, `{"name":"../../etc","cron":"0 0 30 2 *","timezone":"Local","job":{}}`},
		{3, `{"id":"w","resources":{"vram_mb":1,"memory_mb":2,"cpu_millis":3,"slots":4},"tags":["gpu"],"queues":["q"]}`},
		{3, `{"id":"","resources":{"memory_mb":-1}}`},
	}
	for _, s := range seeds {
		f.Add(s.route, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		path := submitRoutes[int(route)%len(submitRoutes)]
		e := newSchedEnv(t, fuzzEpoch, nil)
		e.do(http.MethodPost, "/jobs", `{"command":"seed"}`, nil) // job-1, for depends_on
		before := e.node.Index()
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(string(body)))
		e.h.ServeHTTP(rec, req)
		checkAnswer(t, rec, http.StatusOK, http.StatusCreated, http.StatusBadRequest, http.StatusConflict, http.StatusRequestEntityTooLarge)
		if rec.Code == http.StatusBadRequest && e.node.Index() != before {
			t.Fatalf("POST %s answered 400 but proposed a command: %s", path, rec.Body)
		}
	})
}

func FuzzClaim(f *testing.F) {
	for _, s := range []string{
		`{"worker_id":"w","queues":["default"],"types":["t"],"shell":true,"max":3,"wait":"0s"}`,
		`{"worker_id":"w","wait":"30s"}`,
		`{"worker_id":"","max":-1}`,
		`{"worker_id":"w","max":9223372036854775807,"wait":"-1s"}`,
		`{"worker_id":"w","queues":[""],"types":[null]}`,
		`{"worker_id":"\u0000\n","queues":["` + strings.Repeat("q", 300) + `"]}`,
		`{"worker_id":1}`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		e := newSchedEnv(t, fuzzEpoch, func(c *Config) { c.MaxWait = 0 })
		e.do(http.MethodPost, "/jobs", `{"command":"seed"}`, nil)
		e.do(http.MethodPost, "/jobs", `{"type":"t","queue":"q"}`, nil)
		before := e.node.Index()
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/jobs/claim", strings.NewReader(string(body))))
		checkAnswer(t, rec, http.StatusOK, http.StatusBadRequest, http.StatusRequestEntityTooLarge)
		if rec.Code == http.StatusBadRequest && e.node.Index() != before {
			t.Fatalf("claim answered 400 but proposed a command: %s", rec.Body)
		}
		if rec.Code == http.StatusOK {
			var cr wire.ClaimResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &cr); err != nil {
				t.Fatalf("claim reply %s: %v", rec.Body, err)
			}
		}
	})
}

// checkAnswer requires one of the statuses, and for an error the JSON body
// with a code.
func checkAnswer(t *testing.T, rec *httptest.ResponseRecorder, statuses ...int) {
	t.Helper()
	ok := false
	for _, s := range statuses {
		ok = ok || rec.Code == s
	}
	if !ok {
		t.Fatalf("HTTP %d %s", rec.Code, rec.Body)
	}
	if rec.Code >= 400 {
		var e wire.Error
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code == "" || e.Error == "" {
			t.Fatalf("HTTP %d with body %q: not a JSON error", rec.Code, rec.Body)
		}
	}
}
