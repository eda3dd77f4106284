package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
)

// BenchmarkListTextFilter: the first page of 50 for a filter with no
// indexed term (docs/performance.md, "Search"): a text match on the
// command, which the search index cannot answer, so a page examines jobs
// newest first until it is full or its scan budget (MaxListScan jobs) runs
// out, and says how far it got. WORKRON_LIST_JOBS sets the jobs held
// (default 100,000); one job in 2,000 has "needle" in its command.
//
//	WORKRON_LIST_JOBS=1000000 go test -run '^$' -bench BenchmarkListTextFilter -benchtime 20x ./api
//
// Each case reports the first request's latency (p50, p95 over the runs)
// and, as "fill", the time for a client to follow next_cursor until the
// page holds 50 jobs or the listing ends, as `workron jobs ls` and the
// dashboard do; "requests" is how many requests that took and "scanned"
// how many jobs the first request examined.
func BenchmarkListTextFilter(b *testing.B) {
	jobs := 100_000
	if n, err := strconv.Atoi(os.Getenv("WORKRON_LIST_JOBS")); err == nil && n > 0 {
		jobs = n
	}
	start := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	e := newSchedEnv(b, start, nil)
	const batch = 1000
	for i := 0; i < jobs; i += batch {
		req := wire.BatchSubmitRequest{}
		for k := i; k < i+batch && k < jobs; k++ {
			cmd := fmt.Sprintf("./export tenant=t%d part=%d", k%1000, k)
			if k%2000 == 1999 {
				cmd += " needle"
			}
			req.Jobs = append(req.Jobs, wire.SubmitRequest{Command: cmd, Queue: fmt.Sprintf("q%d", k%16)})
		}
		rec := httptest.NewRecorder()
		body, _ := json.Marshal(req)
		e.srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/jobs/batch", bytes.NewReader(body)))
		if rec.Code != http.StatusCreated {
			b.Fatalf("batch at %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	h := e.srv.Handler() // not the contract check's: it would take most of the time
	get := func(filter, cursor string) wire.JobList {
		q := url.Values{"filter": {filter}, "limit": {"50"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/jobs?"+q.Encode(), nil))
		var l wire.JobList
		if err := json.Unmarshal(rec.Body.Bytes(), &l); rec.Code != http.StatusOK || err != nil {
			b.Fatalf("GET /jobs?%s: %d %v %s", q.Encode(), rec.Code, err, rec.Body)
		}
		return l
	}
	for _, c := range []struct{ name, filter string }{
		{"OneIn2000", `command contains "needle"`},
		{"NoneMatch", `command contains "nosuch"`},
		{"QueueAndText", `queue == "q15" and command contains "needle"`},
	} {
		b.Run(c.name, func(b *testing.B) {
			var first, fill []time.Duration
			var requests, scanned, found int
			for b.Loop() {
				t0 := time.Now()
				l := get(c.filter, "")
				first = append(first, time.Since(t0))
				scanned = l.Scanned
				n, reqs := len(l.Jobs), 1
				for n < 50 && l.NextCursor != "" {
					l = get(c.filter, l.NextCursor)
					n += len(l.Jobs)
					reqs++
				}
				fill = append(fill, time.Since(t0))
				requests, found = reqs, n
			}
			b.ReportMetric(pct(first, 50), "first_p50_ms")
			b.ReportMetric(pct(first, 95), "first_p95_ms")
			b.ReportMetric(pct(fill, 50), "fill_p50_ms")
			b.ReportMetric(pct(fill, 95), "fill_p95_ms")
			b.ReportMetric(float64(requests), "requests")
			b.ReportMetric(float64(scanned), "scanned")
			b.ReportMetric(float64(found), "found")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// pct is the p-th percentile of ds, in milliseconds.
func pct(ds []time.Duration, p int) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[(len(s)-1)*p/100]) / 1e6
}
