package clustertest_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

// TestBadInputIsRejectedAndChangesNothing sends hostile and broken requests
// to followers and the leader. Each gets the right 4xx and a JSON error
// naming the field; input that is wrong whatever the state never reaches
// the log, so the applied index and the state digest stay as they were.
func TestBadInputIsRejectedAndChangesNothing(t *testing.T) {
	c := newCluster(t, 3)
	l := c.Leader(t)
	url := c.URL(l)

	// Some state for the state-dependent cases.
	done := submit(t, url, wire.SubmitRequest{Command: "true", Queue: "bad-input"})
	claimed := claimOne(t, url, "bad-input-worker", "", "bad-input")
	call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+done.ID+"/done", wire.ReportRequest{Lease: claimed.Lease})

	huge := `{"command":"` + strings.Repeat("a", 1<<20+1) + `"}`
	bigResult := `"` + strings.Repeat("r", wire.MaxResultBytes) + `"`
	longMessage := strings.Repeat("m", wire.MaxProgressMessage+1)
	cases := []struct {
		name           string
		method, path   string
		body           any
		status         int
		code           string
		mentions       []string
		stateDependent bool // decided by the FSM against the state: may reach the log
	}{
		{"MalformedJSON", "POST", "/jobs", `{"command":`, 400, "invalid", []string{"JSON"}, false},
		{"NotAnObject", "POST", "/jobs", `[1,2,3]`, 400, "invalid", []string{"body"}, false},
		{"CommandIsANumber", "POST", "/jobs", `{"command":5}`, 400, "invalid", []string{"command"}, false},
		{"PriorityIsAString", "POST", "/jobs", `{"command":"true","priority":"x"}`, 400, "invalid", []string{"priority"}, false},
		{"MaxAttemptsNegative", "POST", "/jobs", `{"command":"true","max_attempts":-1}`, 400, "invalid", []string{"max_attempts"}, false},
		{"MaxAttemptsZero", "POST", "/jobs", `{"command":"true","max_attempts":0}`, 400, "invalid", []string{"max_attempts"}, false},
		{"MaxRetriesDisagreesWithMaxAttempts", "POST", "/jobs", `{"command":"true","max_attempts":2,"max_retries":3}`, 400, "invalid", []string{"max_retries"}, false},
		{"EmptyCommand", "POST", "/jobs", `{"command":""}`, 400, "invalid", []string{"command"}, false},
		{"EmptyBody", "POST", "/jobs", ``, 400, "invalid", []string{"command"}, false},
		{"CommandAndType", "POST", "/jobs", `{"command":"true","type":"email"}`, 400, "invalid", []string{"type"}, false},
		{"BadQueueName", "POST", "/jobs", `{"command":"true","queue":"no spaces!"}`, 400, "invalid", []string{"queue"}, false},
		{"UnknownDependency", "POST", "/jobs", `{"command":"true","depends_on":["job-999999"]}`, 400, "invalid", []string{"depends_on", "job-999999"}, false},
		{"BatchRefOnSingleSubmit", "POST", "/jobs", `{"command":"true","depends_on":["$0"]}`, 400, "invalid", []string{"depends_on"}, false},
		{"TimeoutNotADuration", "POST", "/jobs", `{"command":"true","timeout":"soon"}`, 400, "invalid", []string{"timeout"}, false},
		{"TimeoutNegative", "POST", "/jobs", `{"command":"true","timeout":"-5s"}`, 400, "invalid", []string{"timeout"}, false},
		{"DelayNotADuration", "POST", "/jobs", `{"command":"true","delay":"1 day"}`, 400, "invalid", []string{"delay"}, false},
		{"TimeoutOverAHundredYears", "POST", "/jobs", `{"command":"true","timeout":"2500000h"}`, 400, "invalid", []string{"timeout", "100 years"}, false},
		{"DelayOverAHundredYears", "POST", "/jobs", `{"command":"true","delay":"2500000h"}`, 400, "invalid", []string{"delay", "100 years"}, false},
		{"RetentionOverAHundredYears", "POST", "/jobs", `{"command":"true","retention":"2500000h"}`, 400, "invalid", []string{"retention", "100 years"}, false},
		{"UniqueForOverAHundredYears", "POST", "/jobs", `{"command":"true","idempotency_key":"k","unique_for":"2500000h"}`, 400, "invalid", []string{"unique_for", "100 years"}, false},
		{"RunAtBeyondInt64Nanoseconds", "POST", "/jobs", `{"command":"true","run_at":"3000-01-01T00:00:00Z"}`, 400, "invalid", []string{"run_at", "3000-01-01"}, false},
		{"RunAtBefore1970", "POST", "/jobs", `{"command":"true","run_at":"1600-01-01T00:00:00Z"}`, 400, "invalid", []string{"run_at"}, false},
		{"DelayAndRunAt", "POST", "/jobs", `{"command":"true","delay":"1s","run_at":"2030-01-01T00:00:00Z"}`, 400, "invalid", []string{"delay"}, false},
		{"NegativeJitter", "POST", "/jobs", `{"command":"true","backoff":{"jitter":-0.5}}`, 400, "invalid", []string{"backoff.jitter"}, false},
		{"BackoffMaxBelowBase", "POST", "/jobs", `{"command":"true","backoff":{"base":"10s","max":"1s"}}`, 400, "invalid", []string{"backoff.max"}, false},
		{"EnvWithEmptyKey", "POST", "/jobs", `{"command":"true","env":{"":"x"}}`, 400, "invalid", []string{"env"}, false},
		{"EnvKeyWithEquals", "POST", "/jobs", `{"command":"true","env":{"A=B":"x"}}`, 400, "invalid", []string{"env", "A=B"}, false},
		{"EnvKeyWithNUL", "POST", "/jobs", `{"command":"true","env":{"A\u0000B":"x"}}`, 400, "invalid", []string{"env", "NUL"}, false},
		{"EnvValueWithNUL", "POST", "/jobs", `{"command":"true","env":{"A":"x\u0000y"}}`, 400, "invalid", []string{"env.A", "NUL"}, false},
		{"EnvLoaderVariable", "POST", "/jobs", `{"command":"true","env":{"LD_PRELOAD":"/tmp/evil.so"}}`, 400, "invalid", []string{"env.LD_PRELOAD"}, false},
		{"CommandWithNUL", "POST", "/jobs", `{"command":"true\u0000; id"}`, 400, "invalid", []string{"command", "NUL"}, false},
		{"BatchMemberLoaderVariable", "POST", "/jobs/batch", `{"jobs":[{"command":"true"},{"command":"true","env":{"LD_LIBRARY_PATH":"/tmp"}}]}`, 400, "invalid", []string{"jobs[1].env.LD_LIBRARY_PATH"}, false},
		{"GangLoaderVariable", "POST", "/jobs", `{"command":"true","gang_size":2,"env":{"LD_AUDIT":"x"}}`, 400, "invalid", []string{"env.LD_AUDIT"}, false},
		{"ScheduleJobLoaderVariable", "POST", "/schedules", `{"name":"s","cron":"* * * * *","job":{"command":"true","env":{"LD_PRELOAD":"x"}}}`, 400, "invalid", []string{"job.env.LD_PRELOAD"}, false},
		{"PayloadOnTypedJobNotJSON", "POST", "/jobs", `{"type":"email","payload":"not json`, 400, "invalid", nil, false},
		{"BodyOverOneMiB", "POST", "/jobs", huge, 413, "too_large", nil, false},
		{"BatchEmpty", "POST", "/jobs/batch", `{"jobs":[]}`, 400, "invalid", []string{"jobs"}, false},
		{"BatchBadMember", "POST", "/jobs/batch", `{"jobs":[{"command":"true"},{"command":""}]}`, 400, "invalid", []string{"jobs[1].command"}, false},
		{"BatchRefCycle", "POST", "/jobs/batch", `{"jobs":[{"command":"a","depends_on":["$1"]},{"command":"b","depends_on":["$2"]},{"command":"c","depends_on":["$0"]}]}`, 400, "invalid", []string{"depends_on", "cycle"}, false},
		{"BatchRefToItself", "POST", "/jobs/batch", `{"jobs":[{"command":"a","depends_on":["$0"]},{"command":"b"}]}`, 400, "invalid", []string{"depends_on"}, false},
		{"BatchRefOutOfRange", "POST", "/jobs/batch", `{"jobs":[{"command":"a","depends_on":["$7"]},{"command":"b"}]}`, 400, "invalid", []string{"depends_on", "$7"}, false},
		{"BatchRefNotANumber", "POST", "/jobs/batch", `{"jobs":[{"command":"a","depends_on":["$x"]},{"command":"b"}]}`, 400, "invalid", []string{"depends_on"}, false},
		{"ClaimWithoutWorkerID", "POST", "/jobs/claim", `{"queues":["default"]}`, 400, "invalid", []string{"worker_id"}, false},
		{"ClaimWithBadWait", "POST", "/jobs/claim", `{"worker_id":"w","wait":"forever"}`, 400, "invalid", []string{"wait"}, false},
		{"ClaimWithNegativeMax", "POST", "/jobs/claim", `{"worker_id":"w","max":-1}`, 400, "invalid", []string{"max"}, false},
		{"NextWithoutWorkerID", "GET", "/jobs/next", nil, 400, "invalid", []string{"worker_id"}, false},
		{"RegisterWithoutID", "POST", "/workers/register", `{"resources":{"vram_mb":1}}`, 400, "invalid", []string{"id"}, false},
		{"RegisterNegativeMemory", "POST", "/workers/register", `{"id":"w","resources":{"memory_mb":-1}}`, 400, "invalid", []string{"resources.memory_mb"}, false},
		{"ListWithBadLimit", "GET", "/jobs?limit=0", nil, 400, "invalid", []string{"limit"}, false},
		{"ListWithBadStatus", "GET", "/jobs?status=sleeping", nil, 400, "invalid", []string{"status"}, false},
		{"PauseQueueWithABadName", "POST", "/queues/bad%20name/pause", nil, 400, "invalid", []string{"name"}, false},
		{"KeyWeightZero", "PUT", "/queues/bad-input", `{"key_weights":{"acme":0}}`, 400, "invalid", []string{"key_weights"}, false},
		{"RateLimitedForNotADuration", "POST", "/jobs/" + done.ID + "/fail", `{"rate_limited_for":"soon"}`, 400, "invalid", []string{"rate_limited_for"}, false},
		{"SnoozeForOverADay", "POST", "/jobs/" + done.ID + "/fail", `{"snooze_for":"25h"}`, 400, "invalid", []string{"snooze_for", "24h"}, false},
		{"RateLimitedAndSnoozed", "POST", "/jobs/" + done.ID + "/fail", `{"snooze_for":"1s","rate_limited_for":"1s"}`, 400, "invalid", []string{"snooze_for"}, false},
		{"RateLimitedDoneInABatch", "POST", "/jobs/reports", `{"reports":[{"job_id":"` + done.ID + `","status":"done","rate_limited_for":"1s"}]}`, 400, "invalid", []string{"reports[0].rate_limited_for"}, false},
		{"GetUnknownJob", "GET", "/jobs/job-999999", nil, 404, "not_found", []string{"job-999999"}, false},
		{"UnknownRoute", "GET", "/nope", nil, 404, "not_found", nil, false},
		{"ProgressPercentOver100", "POST", "/workers/bad-input-worker/heartbeat", `{"jobs":[{"job_id":"job-1","lease":1,"progress":{"percent":101}}]}`, 400, "invalid", []string{"jobs[0].progress.percent"}, false},
		{"ProgressMessageTooLong", "POST", "/workers/bad-input-worker/heartbeat", `{"jobs":[{"job_id":"job-1","lease":1,"progress":{"percent":1,"message":"` + longMessage + `"}}]}`, 400, "invalid", []string{"jobs[0].progress.message"}, false},
		{"HeartbeatProgressUnder0", "POST", "/jobs/" + done.ID + "/heartbeat", `{"lease":1,"progress":{"percent":-1}}`, 400, "invalid", []string{"progress.percent"}, false},
		{"HeartbeatProgressOver100", "POST", "/jobs/" + done.ID + "/heartbeat", `{"progress":{"percent":101,"message":"x"}}`, 400, "invalid", []string{"progress.percent"}, false},
		{"HeartbeatProgressMessageTooLong", "POST", "/jobs/" + done.ID + "/heartbeat", `{"lease":1,"progress":{"percent":1,"message":"` + longMessage + `"}}`, 400, "invalid", []string{"progress.message"}, false},
		{"HeartbeatProgressPercentIsAString", "POST", "/jobs/" + done.ID + "/heartbeat", `{"progress":{"percent":"half"}}`, 400, "invalid", []string{"progress.percent"}, false},
		{"ResultTooLarge", "POST", "/jobs/" + done.ID + "/done", `{"lease":1,"result":` + bigResult + `}`, 413, "too_large", []string{"result", "65536"}, false},
		{"ReportProgressOver100", "POST", "/jobs/" + done.ID + "/done", `{"lease":1,"progress":{"percent":101}}`, 400, "invalid", []string{"progress.percent"}, false},
		{"BatchReportResultTooLarge", "POST", "/jobs/reports", `{"reports":[{"job_id":"job-1","status":"done","lease":1,"result":` + bigResult + `}]}`, 413, "too_large", []string{"reports[0].result"}, false},
		{"CancelUnknownJob", "POST", "/jobs/job-999999/cancel", nil, 404, "not_found", []string{"job-999999"}, true},
		{"RetryUnknownJob", "POST", "/jobs/job-999999/retry", nil, 404, "not_found", []string{"job-999999"}, true},
		{"DoneUnknownJob", "POST", "/jobs/job-999999/done", nil, 404, "not_found", []string{"job-999999"}, true},
		{"CancelDoneJob", "POST", "/jobs/" + done.ID + "/cancel", nil, 409, "conflict", []string{done.ID, "done"}, true},
		{"RetryDoneJob", "POST", "/jobs/" + done.ID + "/retry", nil, 409, "conflict", []string{done.ID}, true},
	}
	for k, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Alternate between the leader and followers: validation must
			// hold on both sides of forwarding.
			target := c.URL(k % c.Len())
			before := c.Converged(t, 5*time.Second)
			jobsBefore := listAll(t, url)
			digest := c.Digest(t, l)

			r := send(t, tc.method, target+tc.path, tc.body)
			if r.Status == http.StatusServiceUnavailable { // an election; once more
				r = send(t, tc.method, target+tc.path, tc.body)
			}
			wantError(t, r, tc.status, tc.code, tc.mentions...)

			if !tc.stateDependent {
				if after := c.Applied(l); after != before {
					t.Errorf("applied index moved from %d to %d: the bad request reached the log", before, after)
				} else if d := c.Digest(t, l); d != digest {
					t.Errorf("state digest changed at the same applied index")
				}
			}
			if after := listAll(t, url); after != jobsBefore {
				t.Errorf("the jobs changed:\nbefore %s\nafter  %s", jobsBefore, after)
			}
		})
	}
	c.Converged(t, 5*time.Second)
}

// listAll is every job, as the leader shows it, for before/after checks.
func listAll(t *testing.T, url string) string {
	t.Helper()
	r := call(t, http.StatusOK, http.MethodGet, url+"/jobs?limit=1000", nil)
	// Each job's "scheduled"/"pending" label and nothing else depends on
	// the clock; the cases here leave no job pending.
	return string(r.Body)
}
