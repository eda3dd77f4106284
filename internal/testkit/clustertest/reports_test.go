package clustertest_test

import (
	"net/http"
	"testing"

	"github.com/workron/workron/api/wire"
)

func TestBatchReports(t *testing.T) {
	c := newCluster(t, 1)
	url := c.URL(0)
	for i := 0; i < 3; i++ {
		submit(t, url, wire.SubmitRequest{Command: "x", Queue: "batch"})
	}
	claim := decode[wire.ClaimResponse](t, call(t, http.StatusOK, "POST", url+"/jobs/claim",
		wire.ClaimRequest{WorkerID: "w1", Queues: []string{"batch"}, Max: 3}))
	if len(claim.Jobs) != 3 {
		t.Fatalf("claimed %d jobs, want 3", len(claim.Jobs))
	}
	a, b, d := claim.Jobs[0], claim.Jobs[1], claim.Jobs[2]

	t.Run("EachReportStandsOnItsOwn", func(t *testing.T) {
		req := wire.BatchReportRequest{Reports: []wire.BatchReport{
			{JobID: a.ID, Status: "done", ReportRequest: wire.ReportRequest{Lease: a.Lease}},
			{JobID: b.ID, Status: "failed", ReportRequest: wire.ReportRequest{Lease: b.Lease, Error: "boom"}},
			{JobID: d.ID, Status: "done", ReportRequest: wire.ReportRequest{Lease: d.Lease + 1000}},
			{JobID: "job-999", Status: "done", ReportRequest: wire.ReportRequest{Lease: 1}},
		}}
		got := decode[wire.BatchReportResponse](t, call(t, http.StatusOK, "POST", url+"/jobs/reports", req))
		want := []wire.BatchReportResult{
			{JobID: a.ID, Status: "done"},
			{JobID: b.ID, Status: "pending"}, // retried: attempts left
			{JobID: d.ID, Code: "stale_lease"},
			{JobID: "job-999", Code: "not_found"},
		}
		if len(got.Results) != len(want) {
			t.Fatalf("results %+v", got.Results)
		}
		for i, w := range want {
			g := got.Results[i]
			if g.JobID != w.JobID || g.Status != w.Status || g.Code != w.Code {
				t.Errorf("result %d = %+v, want %+v", i, g, w)
			}
		}
		if j := getJob(t, url, d.ID); j.Status != "running" {
			t.Errorf("job with a refused report is %s, want running", j.Status)
		}
	})

	t.Run("BadBatchesAreRefusedWhole", func(t *testing.T) {
		before := c.Applied(0)
		for _, body := range []any{
			`{"reports":[]}`,
			`{"reports":[{"job_id":"","status":"done"}]}`,
			`{"reports":[{"job_id":"job-1","status":"finished"}]}`,
			`{"reports":"nope"}`,
		} {
			r := send(t, "POST", url+"/jobs/reports", body)
			if r.Status != http.StatusBadRequest {
				t.Errorf("%s: %s, want 400", body, r)
			}
		}
		if after := c.Applied(0); after != before {
			t.Errorf("applied index moved from %d to %d on refused batches", before, after)
		}
	})
}
