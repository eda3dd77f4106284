package api_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"testing"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
)

// TestRequestIDsInLogs checks that a request's X-Request-ID (kept when the
// client sends one, made up otherwise, and carried along when a follower
// forwards) appears in the request's log line and in the lines of the job
// transitions it caused, with the job's id, attempt, worker and lease.
func TestRequestIDsInLogs(t *testing.T) {
	logs := &logBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := clustertest.New(t, 3, clustertest.WithLogger(logger))
	hc := httpClient(t)
	leader := c.Leader(t)
	follower := c.URL(c.Followers(t)[0])

	// Submitted through a follower, which forwards it to the leader.
	r := doHTTP(t, hc, http.StatusCreated, "POST", follower+"/jobs", wire.SubmitRequest{Command: "true", Queue: "logs"},
		"X-Request-ID", "req-submit-1")
	job := decodeJSON[wire.Job](t, r)
	if got := r.Header.Get("X-Request-ID"); got != "req-submit-1" {
		t.Fatalf("reply X-Request-ID = %q, want the one sent", got)
	}
	claimed := decodeJSON[wire.ClaimResponse](t, doHTTP(t, hc, http.StatusOK, "POST", c.URL(leader)+"/jobs/claim",
		wire.ClaimRequest{WorkerID: "w-logs", Queues: []string{"logs"}, Shell: true}, "X-Request-ID", "req-claim-1"))
	if len(claimed.Jobs) != 1 || claimed.Jobs[0].ID != job.ID {
		t.Fatalf("claimed %+v, want %s", claimed.Jobs, job.ID)
	}
	lease := claimed.Jobs[0].Lease
	done := doHTTP(t, hc, http.StatusOK, "POST", c.URL(leader)+"/jobs/"+job.ID+"/done", wire.ReportRequest{Lease: lease})
	madeUp := done.Header.Get("X-Request-ID")
	if madeUp == "" {
		t.Fatal("a request without X-Request-ID got none in its reply")
	}

	// one waits for a line to be written (the request line comes after the
	// handler returns) and returns it.
	one := func(t *testing.T, kv ...string) map[string]any {
		t.Helper()
		var line map[string]any
		clustertest.WaitFor(t, 5e9, func() error {
			found := logs.find(t, kv...)
			if len(found) != 1 {
				return fmt.Errorf("%d log lines with %v, want 1", len(found), kv)
			}
			line = found[0]
			return nil
		})
		return line
	}
	leaderID, followerID := c.Node(leader).ID(), c.Node(c.Followers(t)[0]).ID()
	lease1 := fmt.Sprint(lease)

	t.Run("TheForwardedRequestIsLoggedWithItsIDOnBothNodes", func(t *testing.T) {
		one(t, "msg", "request", "request_id", "req-submit-1", "node", followerID, "route", "POST /jobs", "status", "201")
		one(t, "msg", "request", "request_id", "req-submit-1", "node", leaderID, "route", "POST /jobs", "status", "201")
	})
	t.Run("SubmittedLineCarriesTheRequestID", func(t *testing.T) {
		one(t, "msg", "job submitted", "job", job.ID, "queue", "logs", "request_id", "req-submit-1", "node", leaderID)
	})
	t.Run("ClaimedLineCarriesAttemptWorkerLeaseAndRequestID", func(t *testing.T) {
		one(t, "msg", "job claimed", "job", job.ID, "attempt", "1", "worker", "w-logs", "lease", lease1, "request_id", "req-claim-1")
		one(t, "msg", "request", "request_id", "req-claim-1", "route", "POST /jobs/claim")
	})
	t.Run("AMadeUpIDIsUsedLikeAGivenOne", func(t *testing.T) {
		one(t, "msg", "job done", "job", job.ID, "attempt", "1", "worker", "w-logs", "lease", lease1, "request_id", madeUp)
		one(t, "msg", "request", "request_id", madeUp, "route", "POST /jobs/{id}/done", "status", "200")
	})
}
