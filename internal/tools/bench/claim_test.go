package bench

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/poll"
)

// TestLatencyWorkerReportsOnItsNextClaim: the latency scenario's worker
// claims as the Go worker does. Each job's done report rides on the next
// claim, which does not wait; only a claim with nothing to report
// long-polls; no job gets a done request of its own (a second round trip
// between two jobs, which halved the jobs a worker took a second).
func TestLatencyWorkerReportsOnItsNextClaim(t *testing.T) {
	var (
		mu       sync.Mutex
		ready    = []string{"job-1", "job-2", "job-3"}
		claims   []string // per claim: its wait and how many reports it carried
		separate atomic.Int64
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/jobs/claim" {
			separate.Add(1)
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, `{"results":[]}`)
			return
		}
		var req wire.ClaimRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out := struct {
			Jobs    []jobRef                 `json:"jobs"`
			Reports []wire.BatchReportResult `json:"reports,omitempty"`
		}{Jobs: []jobRef{}}
		for _, rep := range req.Reports {
			out.Reports = append(out.Reports, wire.BatchReportResult{JobID: rep.JobID, Status: wire.StatusDone})
		}
		mu.Lock()
		claims = append(claims, req.Wait+"/"+strings.Repeat("r", len(req.Reports)))
		if len(ready) > 0 {
			out.Jobs = append(out.Jobs, jobRef{ID: ready[0], Attempts: 1, Lease: 1})
			ready = ready[1:]
		}
		mu.Unlock()
		if len(out.Jobs) == 0 && req.Wait != "0s" {
			<-r.Context().Done() // a long-poll nothing comes to
			return
		}
		_ = json.NewEncoder(w).Encode(out)
	}))
	defer srv.Close()
	b := newBencher(Config{Clients: 1, Stderr: io.Discard})
	defer b.hc.CloseIdleConnections()
	tr := newTracker()
	for _, id := range []string{"job-1", "job-2", "job-3"} {
		tr.submitted(id, time.Now())
	}
	var errs, done atomic.Int64
	w := b.latencyWorker(srv.URL, "q", 0, tr, &errs, func() { done.Add(1) })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel() // before srv.Close: ends a long-poll the worker has open
	stopped := make(chan struct{})
	go func() { defer close(stopped); w.run(ctx) }()
	// Done once the three are reported and the claim after them came.
	if err := poll.True(t.Context(), 10*time.Second, time.Millisecond, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return done.Load() == 3 && len(claims) >= 5
	}); err != nil {
		mu.Lock()
		t.Fatalf("%d of 3 jobs reported done, claims %q: %v", done.Load(), claims, err)
	}
	cancel()
	<-stopped
	mu.Lock()
	defer mu.Unlock()
	// job-1 comes to a long-poll; each next claim carries the report of
	// the job before and does not wait; the one after job-3's report finds
	// nothing and long-polls.
	want := "30s/ 0s/r 0s/r 0s/r 30s/"
	if got := strings.Join(claims, " "); !strings.HasPrefix(got, want) || separate.Load() != 0 || errs.Load() != 0 {
		t.Errorf("claims (wait/reports) %q, want %q then long-polls; %d requests besides claims, %d errors; want none",
			got, want, separate.Load(), errs.Load())
	}
	if bad := tr.check(true); len(bad) > 0 {
		t.Errorf("tracker: %v", bad)
	}
}
