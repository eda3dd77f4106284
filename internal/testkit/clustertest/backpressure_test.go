package clustertest_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
)

// TestRateLimitedPausesTheKeyClusterWide has one worker report an attempt
// rate-limited through a follower; another worker, through another node,
// then gets none of that key's jobs, and still none after the leader dies
// (the pause is replicated state), while the other keys' jobs run.
func TestRateLimitedPausesTheKeyClusterWide(t *testing.T) {
	c := newCluster(t, 3)
	l := c.Leader(t)
	f := c.Followers(t)
	a := submit(t, c.URL(l), wire.SubmitRequest{Command: "call", Queue: "api", ConcurrencyKey: "acme"})
	b := submit(t, c.URL(l), wire.SubmitRequest{Command: "call", Queue: "api", ConcurrencyKey: "acme"})
	beta := submit(t, c.URL(l), wire.SubmitRequest{Command: "call", Queue: "api", ConcurrencyKey: "beta"})

	got := claimOne(t, c.URL(f[0]), "w1", "", "api")
	if got.ID != a.ID {
		t.Fatalf("w1 claimed %s, want %s (acme's first, in turn before beta)", got.ID, a.ID)
	}
	call(t, http.StatusOK, http.MethodPost, c.URL(f[0])+"/jobs/"+a.ID+"/fail",
		wire.ReportRequest{Lease: got.Lease, Error: "429 Too Many Requests", RateLimitedFor: "1h"})

	r := decode[wire.ClaimResponse](t, call(t, http.StatusOK, http.MethodPost, c.URL(f[1])+"/jobs/claim", wire.ClaimRequest{WorkerID: "w2", Queues: []string{"api"}, Max: 5}))
	if len(r.Jobs) != 1 || r.Jobs[0].ID != beta.ID {
		t.Fatalf("w2 claimed %+v while acme is paused, want beta's %s only", r.Jobs, beta.ID)
	}
	if j := getJob(t, c.URL(f[1]), b.ID); !strings.HasPrefix(j.Waiting, "key acme rate-limited until ") || j.WaitingCode != wire.WaitLimit {
		t.Errorf("acme's other job waits %q (%s)", j.Waiting, j.WaitingCode)
	}
	if j := getJob(t, c.URL(f[1]), a.ID); j.Attempts != 0 || len(j.AttemptHistory) != 1 || j.AttemptHistory[0].Status != wire.AttemptRateLimited {
		t.Errorf("the rate-limited job: %d attempts, history %+v", j.Attempts, j.AttemptHistory)
	}

	c.Kill(t, l)
	nl := c.Leader(t)
	submit(t, c.URL(nl), wire.SubmitRequest{Command: "call", Queue: "api", ConcurrencyKey: "gamma"})
	clustertest.WaitFor(t, 10*time.Second, func() error {
		q := decode[wire.Queue](t, call(t, http.StatusOK, http.MethodGet, c.URL(nl)+"/queues/api", nil))
		if q.Limits == nil || len(q.Limits.Paused) != 1 || q.Limits.Paused[0].Key != "acme" {
			return fmt.Errorf("queue after the failover: %+v", q.Limits)
		}
		return nil
	})
	r = decode[wire.ClaimResponse](t, call(t, http.StatusOK, http.MethodPost, c.URL(nl)+"/jobs/claim", wire.ClaimRequest{WorkerID: "w3", Queues: []string{"api"}, Max: 5}))
	if len(r.Jobs) != 1 || r.Jobs[0].ConcurrencyKey != "gamma" {
		t.Fatalf("w3 claimed %+v on the new leader, want gamma's job only", r.Jobs)
	}
}
