package client_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/worker/client"
)

// finishedParents submits parents jobs and a child depending on them all,
// finishes the parents with results of about size bytes each, and returns
// their results by id and the child's id.
func finishedParents(t *testing.T, cl *client.Client, parents, size int) (map[string]json.RawMessage, string) {
	t.Helper()
	ctx := t.Context()
	var reqs []wire.SubmitRequest
	var deps []string
	for i := range parents {
		reqs = append(reqs, wire.SubmitRequest{Command: fmt.Sprintf("parent %d", i)})
		deps = append(deps, fmt.Sprintf("$%d", i))
	}
	reqs = append(reqs, wire.SubmitRequest{Command: "child", DependsOn: deps})
	jobs, err := cl.SubmitBatch(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	cr, err := cl.Claim(ctx, wire.ClaimRequest{WorkerID: "w1", Shell: true, Max: parents})
	if err != nil || len(cr.Jobs) != parents {
		t.Fatalf("claim of the parents: %v, %d jobs", err, len(cr.Jobs))
	}
	results := make(map[string]json.RawMessage)
	var reps []wire.BatchReport
	for _, j := range cr.Jobs {
		r := json.RawMessage(fmt.Sprintf(`{"parent":%q,"pad":%q}`, j.ID, strings.Repeat("x", size)))
		results[j.ID] = r
		reps = append(reps, wire.BatchReport{JobID: j.ID, Status: wire.StatusDone, ReportRequest: wire.ReportRequest{Lease: j.Lease, Result: r}})
	}
	if _, err := cl.Reports(ctx, reps); err != nil {
		t.Fatal(err)
	}
	return results, jobs[parents].ID
}

// TestFetchParentResults: a claim reply that cut a job's parent results
// short (20 parents of 60 KiB, over wire.MaxClaimJobParentBytes) is
// completed by FetchParentResults, page by page through a follower: every
// parent's result once; a job not cut short costs no request. Leases last
// a minute: the parents are claimed, then reported, and under a loaded
// race run the default 2 s ran out in between.
func TestFetchParentResults(t *testing.T) {
	c := clustertest.New(t, 3, clustertest.WithLeaseTTL(time.Minute))
	cl := newClient(t, nil, c.URL(c.Followers(t)[0]))
	ctx := t.Context()
	results, child := finishedParents(t, cl, 20, 60<<10)

	// A long poll: an election under a loaded run may come between the
	// parents' reports and this claim.
	cr, err := cl.Claim(ctx, wire.ClaimRequest{WorkerID: "w1", Shell: true, Wait: "20s"})
	if err != nil || len(cr.Jobs) != 1 || cr.Jobs[0].ID != child {
		t.Fatalf("claim of the child: %v %+v", err, cr)
	}
	job := cr.Jobs[0]
	if !job.ParentResultsTruncated || len(job.ParentResults) >= len(results) {
		t.Fatalf("the claim carries %d of %d parent results, truncated %v: want them cut short", len(job.ParentResults), len(results), job.ParentResultsTruncated)
	}
	page, err := cl.ParentResults(ctx, job.ID, job.ParentResultsCursor, 1)
	if err != nil || len(page.ParentResults) != 1 || page.NextCursor == "" {
		t.Fatalf("a page of one: %v %+v", err, page)
	}
	for id := range page.ParentResults {
		if _, twice := job.ParentResults[id]; twice {
			t.Fatalf("the page after the claim's cursor repeats %s", id)
		}
	}
	if err := cl.FetchParentResults(ctx, &job); err != nil {
		t.Fatal(err)
	}
	if job.ParentResultsTruncated || job.ParentResultsCursor != "" || len(job.ParentResults) != len(results) {
		t.Fatalf("after FetchParentResults: %d of %d results, truncated %v, cursor %q", len(job.ParentResults), len(results), job.ParentResultsTruncated, job.ParentResultsCursor)
	}
	for id, want := range results {
		if string(job.ParentResults[id]) != string(want) {
			t.Fatalf("parent %s: result %.40s, want %.40s", id, job.ParentResults[id], want)
		}
	}
	// A whole job is left alone: no request (an empty client would fail).
	whole := wire.Job{ID: "job-x", ParentResults: map[string]json.RawMessage{"p": json.RawMessage(`1`)}}
	if err := newClient(t, nil, closedURL(t)).FetchParentResults(ctx, &whole); err != nil || len(whole.ParentResults) != 1 {
		t.Fatalf("FetchParentResults of a whole job: %v %+v", err, whole)
	}
	if _, err := cl.ParentResults(ctx, "nope", "", 0); !client.IsNotFound(err) {
		t.Fatalf("ParentResults(nope) = %v, want not found", err)
	}
}
