package api

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/workron/workron/api/jobfilter"
	"github.com/workron/workron/api/wire"
)

// TestCountByIndex: a count whose filter is all indexed terms counts from
// the index, reading no job (the FSM's delayed jobs tell pending from
// scheduled), and agrees with counting by reading every candidate, on
// random jobs of every status.
func TestCountByIndex(t *testing.T) {
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	e := newSchedEnv(t, start, nil)
	r := rand.New(rand.NewPCG(30, 1))
	one := 1
	for i := range 150 {
		e.clock.Set(start.Add(time.Duration(i) * time.Second))
		req := wire.SubmitRequest{Command: fmt.Sprintf("echo %d", i), Queue: fmt.Sprintf("q%d", r.IntN(3)), MaxAttempts: &one,
			Metadata: map[string]string{"tenant": fmt.Sprintf("t%d", r.IntN(4))}}
		if r.IntN(5) == 0 {
			later := start.Add(time.Duration(r.IntN(4)) * time.Hour)
			req.RunAt = &later // scheduled, or pending again by the end
		}
		if code, werr := e.do(http.MethodPost, "/jobs", req, nil); code != http.StatusCreated {
			t.Fatalf("submit %d: %d %+v", i, code, werr)
		}
	}
	e.clock.Set(start.Add(90 * time.Minute))
	var cr wire.ClaimResponse
	if code, werr := e.do(http.MethodPost, "/jobs/claim", `{"worker_id":"w","shell":true,"queues":["q0","q1","q2"],"max":60}`, &cr); code != http.StatusOK || len(cr.Jobs) == 0 {
		t.Fatalf("claim: %d %+v", code, werr)
	}
	for _, j := range cr.Jobs {
		switch r.IntN(3) {
		case 0: // running
		case 1:
			e.report(t, j, "done")
		case 2:
			e.report(t, j, "fail")
		}
	}
	for range 10 {
		var page wire.JobList
		if code, werr := e.do(http.MethodGet, "/jobs?status=pending&limit=50", nil, &page); code != http.StatusOK || len(page.Jobs) == 0 {
			t.Fatalf("list pending: %d %+v", code, werr)
		}
		id := page.Jobs[r.IntN(len(page.Jobs))].ID
		if code, werr := e.do(http.MethodPost, "/jobs/"+id+"/cancel", nil, nil); code != http.StatusOK {
			t.Fatalf("cancel %s: %d %+v", id, code, werr)
		}
	}

	now := e.clock.Now().UnixNano()
	mid := start.Add(75 * time.Second).Format(time.RFC3339Nano)
	filters := []string{"", `queue == "q1"`, `metadata["tenant"] == "t2"`, `queue == "q0" and metadata["tenant"] == "t3"`,
		`status == "done"`, `status == "running" and queue == "q2"`, `status == "failed" and metadata["tenant"] == "t1"`,
		`created_at >= "` + mid + `"`, `queue == "q2" and created_at < "` + mid + `"`, `queue == "none"`}
	byIndex := 0
	for _, text := range filters {
		f, err := jobfilter.Compile(text, now)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		if !f.OnlyTerms() {
			t.Errorf("%q: not only terms", text)
			continue
		}
		want, err := e.srv.countByReading(f, 0, MaxCountScan, now)
		if err != nil || !want.Exact {
			t.Fatalf("%q by reading: %+v, %v", text, want, err)
		}
		var got wire.JobCount
		if code, werr := e.do(http.MethodGet, "/jobs/count?filter="+url.QueryEscape(text), nil, &got); code != http.StatusOK {
			t.Fatalf("count %q: %d %+v", text, code, werr)
		}
		if got.Count != want.Count || !maps.Equal(got.ByStatus, want.ByStatus) || !got.Exact {
			t.Errorf("count %q: %d %v (exact %v), want %d %v as reading every job gives", text, got.Count, got.ByStatus, got.Exact, want.Count, want.ByStatus)
		}
		if got.Scanned != 0 {
			t.Errorf("count %q read %d jobs, want none (%d read to count by reading)", text, got.Scanned, want.Scanned)
		}
		if got.Count > 0 {
			byIndex++
		}
	}
	if byIndex < len(filters)-2 {
		t.Errorf("only %d filters matched a job: the test data is too thin", byIndex)
	}
	for _, text := range []string{`status == "pending"`, `status == "scheduled" and queue == "q0"`, `queue == "q0" or queue == "q1"`, `attempts > 0`, `not (queue == "q0")`} {
		if f, err := jobfilter.Compile(text, now); err != nil || f.OnlyTerms() {
			t.Errorf("%q: only terms %v (%v), want false: its jobs must be read", text, f.OnlyTerms(), err)
		}
	}
}

// report ends a claimed job's attempt with "done" or "fail".
func (e *schedEnv) report(t *testing.T, j wire.Job, how string) {
	t.Helper()
	if code, werr := e.do(http.MethodPost, "/jobs/"+j.ID+"/"+how, wire.ReportRequest{Lease: j.Lease}, nil); code != http.StatusOK {
		t.Fatalf("%s %s: %d %+v", how, j.ID, code, werr)
	}
}
