package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
)

// TestEveryListIsBounded: each list a request can carry has a limit, and a
// request over it gets 400 naming the field, with the state unchanged.
func TestEveryListIsBounded(t *testing.T) {
	e := newSchedEnv(t, time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), nil)
	var parent wire.Job
	if code, werr := e.do(http.MethodPost, "/jobs", `{"command":"true","metadata":{"k":"v"}}`, &parent); code != http.StatusCreated {
		t.Fatalf("submit: %d %+v", code, werr)
	}
	// MaxDependents jobs depend on parent, proposed at once (the FSM does
	// not limit batches; the API does).
	batch := make([]fsm.NewJob, MaxDependents)
	for i := range batch {
		batch[i] = fsm.NewJob{Command: "true", DependsOn: []string{parent.ID}}
	}
	if _, err := e.node.Propose(context.Background(), fsm.Cmd{Op: fsm.OpSubmit, Submit: &fsm.Submit{Jobs: batch}}); err != nil {
		t.Fatal(err)
	}
	if ids, err := e.srv.state.Dependents(parent.ID); err != nil || len(ids) != MaxDependents {
		t.Fatalf("parent has %d dependents (%v), want %d", len(ids), err, MaxDependents)
	}

	names := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s%d", prefix, i)
		}
		return out
	}
	many := make([]string, MaxDependencies)
	for i := range many {
		many[i] = fmt.Sprintf("job-%d", i+2) // dependents of parent, all stored
	}
	fanIn := make([]wire.SubmitRequest, MaxBatchDependencies/MaxDependencies+1)
	for i := range fanIn {
		fanIn[i] = wire.SubmitRequest{Command: "true", DependsOn: many}
	}
	leases := make([]wire.JobLease, MaxHeartbeatJobs+1)
	for i := range leases {
		leases[i] = wire.JobLease{JobID: "job-1", Lease: uint64(i + 1)}
	}
	filters := url.Values{}
	for _, k := range names("metadata.k", MaxListFilters+1) {
		filters.Set(k, "v")
	}
	cases := []struct {
		name, method, path string
		body               any
		field              string
	}{
		{"OneMoreDependentOfAJob", "POST", "/jobs", wire.SubmitRequest{Command: "true", DependsOn: []string{parent.ID}}, "depends_on"},
		{"ABatchOverItsDependencies", "POST", "/jobs/batch", wire.BatchSubmitRequest{Jobs: fanIn}, fmt.Sprintf("jobs[%d].depends_on", len(fanIn)-1)},
		{"TooManyDependenciesOfOneJob", "POST", "/jobs", wire.SubmitRequest{Command: "true", DependsOn: append(many, "job-1")}, "depends_on"},
		{"ClaimOfTooManyQueues", "POST", "/jobs/claim", wire.ClaimRequest{WorkerID: "w", Queues: names("q", MaxQueues+1)}, "queues"},
		{"ClaimOfTooManyTypes", "POST", "/jobs/claim", wire.ClaimRequest{WorkerID: "w", Types: names("t", MaxTypes+1)}, "types"},
		{"WorkerOfTooManyQueues", "POST", "/workers/register", wire.Worker{ID: "w", Queues: names("q", MaxQueues+1)}, "queues"},
		{"HeartbeatOfTooManyLeases", "POST", "/workers/w/heartbeat", wire.WorkerHeartbeatRequest{Jobs: leases}, "jobs"},
		{"ListOfTooManyFilters", "GET", "/jobs?" + filters.Encode(), nil, "metadata"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := e.srv.state.Applied()
			code, werr := e.do(c.method, c.path, c.body, nil)
			if code != http.StatusBadRequest || werr.Code != "invalid" || !strings.HasPrefix(werr.Error, c.field+":") {
				t.Fatalf("got %d %+v, want 400 invalid naming %s", code, werr, c.field)
			}
			if after := e.srv.state.Applied(); after != before {
				t.Fatalf("a refused request was proposed: applied index %d, was %d", after, before)
			}
		})
	}

	t.Run("AMetadataFilterReadsItsIndexAndFindsTheOneMatchBehindManyJobs", func(t *testing.T) {
		// Only the oldest job matches, behind MaxDependents newer ones: more
		// than one page may examine (MaxListScan), but the metadata index
		// (store/index.go) gives the match alone.
		var page wire.JobList
		if code, werr := e.do(http.MethodGet, "/jobs?metadata.k=v&limit=5", nil, &page); code != http.StatusOK {
			t.Fatalf("list: %d %+v", code, werr)
		}
		if page.NextCursor != "" || len(page.Jobs) != 1 || page.Jobs[0].ID != parent.ID {
			t.Fatalf("first page = %+v, want the parent alone and no cursor", page)
		}
	})
}

// TestSeedClaimOverMoreQueuesThanAClaimMayName: GET /jobs/next without a
// queue names the queues for its worker; more queues holding jobs than a
// claim may name is no error, and the longest-waiting queue is served.
func TestSeedClaimOverMoreQueuesThanAClaimMayName(t *testing.T) {
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	e := newSchedEnv(t, start, nil)
	for i := range MaxQueues + 8 {
		e.clock.Set(start.Add(time.Duration(i) * time.Second))
		if code, werr := e.do(http.MethodPost, "/jobs", wire.SubmitRequest{Command: "true", Queue: fmt.Sprintf("q%02d", MaxQueues+8-i)}, nil); code != http.StatusCreated {
			t.Fatalf("submit: %d %+v", code, werr)
		}
	}
	e.clock.Set(start.Add(time.Hour))
	var j wire.Job
	if code, werr := e.do(http.MethodGet, "/jobs/next?worker_id=w", nil, &j); code != http.StatusOK {
		t.Fatalf("GET /jobs/next: %d %+v, want 200 with a job", code, werr)
	}
	if want := fmt.Sprintf("q%02d", MaxQueues+8); j.Queue != want {
		t.Errorf("claimed a job of queue %s, want %s (the longest-waiting)", j.Queue, want)
	}
}
