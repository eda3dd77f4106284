package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

// parentsEnv is a server holding parents finished with large results and
// children that each depend on all of them.
type parentsEnv struct {
	*schedEnv
	results  map[string]json.RawMessage // each parent's result, by id
	children []string
}

// newParentsEnv finishes parents parents, each with a result of about
// size bytes (one with characters encoding/json escapes, one without a
// result), and leaves children children pending on all of them.
func newParentsEnv(t *testing.T, parents, children, size int) *parentsEnv {
	t.Helper()
	e := newSchedEnv(t, time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), nil)
	var batch wire.BatchSubmitRequest
	var deps []string
	for i := range parents {
		batch.Jobs = append(batch.Jobs, wire.SubmitRequest{Command: fmt.Sprintf("parent %d", i)})
		deps = append(deps, fmt.Sprintf("$%d", i))
	}
	for i := range children {
		batch.Jobs = append(batch.Jobs, wire.SubmitRequest{Command: fmt.Sprintf("child %d", i), DependsOn: deps})
	}
	var list wire.JobList
	if code, werr := e.do(http.MethodPost, "/jobs/batch", batch, &list); code != http.StatusCreated {
		t.Fatalf("batch: %d %+v", code, werr)
	}
	var cr wire.ClaimResponse
	if code, werr := e.do(http.MethodPost, "/jobs/claim", wire.ClaimRequest{WorkerID: "w1", Shell: true, Max: parents}, &cr); code != http.StatusOK || len(cr.Jobs) != parents {
		t.Fatalf("claim of the parents: %d %+v %d jobs", code, werr, len(cr.Jobs))
	}
	pe := &parentsEnv{schedEnv: e, results: make(map[string]json.RawMessage)}
	var reps wire.BatchReportRequest
	for i, j := range cr.Jobs {
		rep := wire.BatchReport{JobID: j.ID, Status: "done", ReportRequest: wire.ReportRequest{Lease: j.Lease}}
		if i != 1 { // parent 1 returns nothing
			pad := strings.Repeat("x", size)
			if i == 2 {
				pad = strings.Repeat("<&>", size/3)
			}
			rep.Result = json.RawMessage(fmt.Sprintf(`{"parent":%q,"pad":%q}`, j.ID, pad))
			pe.results[j.ID] = rep.Result
		}
		reps.Reports = append(reps.Reports, rep)
	}
	var body strings.Builder // as sent: encoding/json would escape < & >
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(reps); err != nil {
		t.Fatal(err)
	}
	if code, werr := e.do(http.MethodPost, "/jobs/reports", body.String(), nil); code != http.StatusOK {
		t.Fatalf("reports: %d %+v", code, werr)
	}
	for _, j := range list.Jobs[parents:] {
		pe.children = append(pe.children, j.ID)
	}
	return pe
}

// claimRaw claims up to max jobs and returns the reply and its size.
func (e *parentsEnv) claimRaw(max int) (wire.ClaimResponse, int) {
	e.t.Helper()
	body := fmt.Sprintf(`{"worker_id":"w2","shell":true,"max":%d}`, max)
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/jobs/claim", strings.NewReader(body)))
	var cr wire.ClaimResponse
	if rec.Code != http.StatusOK {
		e.t.Fatalf("claim: %d %s", rec.Code, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &cr); err != nil {
		e.t.Fatalf("claim reply: %v", err)
	}
	return cr, rec.Body.Len()
}

// rest pages through a job's parent results from cursor, limit a page.
func (e *parentsEnv) rest(id, cursor, limit string) (pages []wire.ParentResultsPage) {
	e.t.Helper()
	for cursor != "" {
		var p wire.ParentResultsPage
		path := "/jobs/" + id + "/parent_results?cursor=" + cursor + limit
		if code, werr := e.do(http.MethodGet, path, nil, &p); code != http.StatusOK {
			e.t.Fatalf("GET %s: %d %+v", path, code, werr)
		}
		if len(pages) > 2*len(e.results) {
			e.t.Fatalf("more pages than parents: the cursor does not move (%q)", cursor)
		}
		pages, cursor = append(pages, p), p.NextCursor
	}
	return pages
}

// TestClaimParentResultsBounded: a claim of jobs that each depend on many
// parents with large results carries at most wire.MaxClaimJobParentBytes
// of them per job and wire.MaxClaimParentBytes in all, says which jobs it
// cut short, and GET /jobs/{id}/parent_results gives the rest by pages:
// every parent's result exactly once.
func TestClaimParentResultsBounded(t *testing.T) {
	const parents, children, size = 40, 6, 60 << 10
	e := newParentsEnv(t, parents, children, size)
	cr, n := e.claimRaw(10)
	if len(cr.Jobs) != children {
		t.Fatalf("claimed %d jobs, want the %d children", len(cr.Jobs), children)
	}
	// The jobs' own fields (each names its 40 parents) take a few KiB.
	if limit := wire.MaxClaimParentBytes + 64<<10; n > limit {
		t.Fatalf("claim reply is %d bytes, want at most %d", n, limit)
	}
	total := 0
	for _, j := range cr.Jobs {
		bytes := 0
		for id, r := range j.ParentResults {
			bytes += parentResultBytes(id, r)
		}
		if bytes > wire.MaxClaimJobParentBytes {
			t.Errorf("job %s carries %d bytes of parent results, want at most %d", j.ID, bytes, wire.MaxClaimJobParentBytes)
		}
		total += bytes
		if !j.ParentResultsTruncated || j.ParentResultsCursor == "" {
			t.Errorf("job %s: truncated %v cursor %q, want both set (%d of %d results)", j.ID, j.ParentResultsTruncated, j.ParentResultsCursor, len(j.ParentResults), len(e.results))
		}
	}
	if total > wire.MaxClaimParentBytes || total < wire.MaxClaimParentBytes/2 {
		t.Fatalf("the claim carries %d bytes of parent results, want at most %d and not much less", total, wire.MaxClaimParentBytes)
	}

	for _, j := range cr.Jobs {
		for _, limit := range []string{"", "&limit=3"} {
			got := make(map[string]json.RawMessage)
			count := func(from string, m map[string]json.RawMessage) {
				for id, r := range m {
					if _, twice := got[id]; twice {
						t.Errorf("job %s: parent %s's result came twice (again in %s)", j.ID, id, from)
					}
					got[id] = r
				}
			}
			count("the claim", j.ParentResults)
			for i, p := range e.rest(j.ID, j.ParentResultsCursor, limit) {
				if limit != "" && len(p.ParentResults) > 3 {
					t.Errorf("job %s: page %d holds %d results, over its limit 3", j.ID, i, len(p.ParentResults))
				}
				count(fmt.Sprintf("page %d", i), p.ParentResults)
			}
			if len(got) != len(e.results) {
				t.Errorf("job %s (limit %q): %d parent results in all, want %d", j.ID, limit, len(got), len(e.results))
			}
			for id, want := range e.results {
				if !sameJSON(got[id], want) {
					t.Errorf("job %s: parent %s's result is %.40q, want %.40q", j.ID, id, got[id], want)
				}
			}
		}
	}
}

// TestParentResultsPages: each page is bounded, starts at the cursor it
// was given, and a bad cursor or limit is refused naming it.
func TestParentResultsPages(t *testing.T) {
	const parents, size = 140, 60 << 10 // about 8 MiB: three pages
	e := newParentsEnv(t, parents, 1, size)
	child := e.children[0]
	pages := e.rest(child, "0", "")
	if len(pages) < 2 {
		t.Fatalf("%d pages, want several", len(pages))
	}
	for i, p := range pages {
		bytes := 0
		for id, r := range p.ParentResults {
			bytes += parentResultBytes(id, r)
		}
		if bytes > wire.MaxParentResultsPageBytes || len(p.ParentResults) == 0 {
			t.Errorf("page %d: %d results, %d bytes; want some and at most %d bytes", i, len(p.ParentResults), bytes, wire.MaxParentResultsPageBytes)
		}
	}
	var last wire.ParentResultsPage
	if code, werr := e.do(http.MethodGet, fmt.Sprintf("/jobs/%s/parent_results?cursor=%d", child, parents), nil, &last); code != http.StatusOK || len(last.ParentResults) != 0 || last.NextCursor != "" {
		t.Fatalf("the page at the end: %d %+v %+v, want an empty last page", code, werr, last)
	}
	for query, field := range map[string]string{
		"cursor=-1":                         "cursor",
		"cursor=x":                          "cursor",
		fmt.Sprintf("cursor=%d", parents+1): "cursor",
		"limit=0":                           "limit",
		"limit=1001":                        "limit",
	} {
		code, werr := e.do(http.MethodGet, "/jobs/"+child+"/parent_results?"+query, nil, nil)
		if code != http.StatusBadRequest || !strings.HasPrefix(werr.Error, field+":") {
			t.Errorf("?%s: %d %+v, want 400 naming %s", query, code, werr, field)
		}
	}
	if code, _ := e.do(http.MethodGet, "/jobs/nope/parent_results", nil, nil); code != http.StatusNotFound {
		t.Errorf("unknown job: %d, want 404", code)
	}
}

// TestClaimParentResultsUnderTheBoundsAreWhole: a claim whose parent
// results fit carries them all and says nothing more (the reply an older
// worker reads).
func TestClaimParentResultsUnderTheBoundsAreWhole(t *testing.T) {
	e := newParentsEnv(t, 5, 2, 1<<10)
	cr, _ := e.claimRaw(2)
	for _, j := range cr.Jobs {
		if j.ParentResultsTruncated || j.ParentResultsCursor != "" || len(j.ParentResults) != len(e.results) {
			t.Fatalf("job %s: %d of %d results, truncated %v cursor %q; want all, untruncated", j.ID, len(j.ParentResults), len(e.results), j.ParentResultsTruncated, j.ParentResultsCursor)
		}
	}
}

// sameJSON says whether a and b hold the same JSON value (a reply may
// escape what a request did not).
func sameJSON(a, b json.RawMessage) bool {
	var va, vb any
	return json.Unmarshal(a, &va) == nil && json.Unmarshal(b, &vb) == nil && reflect.DeepEqual(va, vb)
}
