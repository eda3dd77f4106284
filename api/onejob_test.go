//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

// TestSubmitAndInvokeRefuseAlike: POST /jobs and an invoke's child job
// (POST /jobs/{id}/steps/{key}/invoke) check a job with one piece of
// validation (oneJob), so a bad job gets 400 invalid naming the same field
// from both: the invoke's under "job.", but for depends_on, which both name
// unprefixed. Nothing is submitted either way.
func TestSubmitAndInvokeRefuseAlike(t *testing.T) {
	e := newSchedEnv(t, time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), nil)
	for _, tc := range []struct {
		name, job, field string
		prefixed         bool // the invoke names the field under "job."
	}{
		{"NoCommandNorType", `{}`, "command", true},
		{"CommandAndType", `{"command":"true","type":"email"}`, "type", true},
		{"CommandWithNUL", `{"command":"a\u0000b"}`, "command", true},
		{"BadQueueName", `{"command":"true","queue":"a b"}`, "queue", true},
		{"PriorityOutOfRange", `{"command":"true","priority":1000001}`, "priority", true},
		{"UniqueForWithoutAKey", `{"command":"true","unique_for":"1h"}`, "unique_for", true},
		{"ALoaderVariable", `{"command":"true","env":{"LD_PRELOAD":"x.so"}}`, "env.LD_PRELOAD", true},
		{"ABatchPosition", `{"command":"true","depends_on":["$0"]}`, "depends_on", false},
		{"AnUnknownDependency", `{"command":"true","depends_on":["no-such-job"]}`, "depends_on", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, werr := e.do(http.MethodPost, "/jobs", tc.job, nil)
			if code != http.StatusBadRequest || werr.Code != wire.CodeInvalid || !strings.HasPrefix(werr.Error, tc.field+": ") {
				t.Fatalf("POST /jobs %s: %d %+v, want 400 invalid naming %s", tc.job, code, werr, tc.field)
			}
			want := tc.field
			if tc.prefixed {
				want = "job." + tc.field
			}
			body := `{"lease":1,"job":` + tc.job + `}`
			if !json.Valid([]byte(body)) {
				t.Fatalf("bad case: %s is not JSON", body)
			}
			code, ierr := e.do(http.MethodPost, "/jobs/job-1/steps/child/invoke", body, nil)
			if code != http.StatusBadRequest || ierr.Code != wire.CodeInvalid || !strings.HasPrefix(ierr.Error, want+": ") {
				t.Fatalf("invoke %s: %d %+v, want 400 invalid naming %s", tc.job, code, ierr, want)
			}
			if got, rest := strings.TrimPrefix(ierr.Error, want+": "), strings.TrimPrefix(werr.Error, tc.field+": "); got != rest {
				t.Fatalf("the two reasons differ: invoke %q, submit %q", got, rest)
			}
		})
	}
	var list wire.JobList
	if code, werr := e.do(http.MethodGet, "/jobs", nil, &list); code != http.StatusOK || len(list.Jobs) != 0 {
		t.Fatalf("jobs after the refusals: %d %+v %d jobs, want none", code, werr, len(list.Jobs))
	}
}
